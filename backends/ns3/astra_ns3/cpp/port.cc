// Port: the egress queue discipline of one device and its hand-off to the device.
//
// The device (PointToPointNetDevice) keeps at most one packet waiting behind
// the one on the wire: the port hands over the next packet when a transmission
// begins (PhyTxBegin), so a PFC pause or a newly urgent control frame takes
// effect within two frames, and the port's own queues are where packets wait.
#include "roce.h"

#include <algorithm>
#include <limits>

namespace astra_ns3
{

int64_t
Port::TxTime(uint64_t bytes) const
{
    return static_cast<int64_t>(static_cast<double>(bytes) * 8e12 / rate + 0.5);
}

void
Port::SendControl(ns3::Ptr<ns3::Packet> p)
{
    ctrl.push_back(p);
    Pump();
}

void
Port::EnqueueTransit(ns3::Ptr<ns3::Packet> p, uint32_t size, uint16_t ingress)
{
    AccountQueue();
    data.push_back(Transit{p, size, ingress});
    data_bytes += size;
    if (data_bytes > max_queue)
    {
        max_queue = data_bytes;
    }
    Pump();
}

void
Port::SetPaused(bool pause)
{
    int64_t now = ns3::Simulator::Now().GetPicoSeconds();
    if (pause)
    {
        ++pauses_received;
        if (!paused)
        {
            paused_since = now;
            fab->Changed(this);
        }
        paused = true;
        return;
    }
    if (paused)
    {
        paused_ps += now - paused_since;
        fab->Changed(this);
    }
    paused = false;
    Pump();
}

void
Port::RemoveQp(Qp* q)
{
    auto it = std::find(qps.begin(), qps.end(), q);
    if (it == qps.end())
    {
        return;
    }
    size_t pos = static_cast<size_t>(it - qps.begin());
    qps.erase(it);
    // Round-robin slot 0 is the transit queue, slot k the (k-1)-th queue pair.
    if (rr > pos + 1)
    {
        --rr;
    }
    if (rr > qps.size())
    {
        rr = 0;
    }
}

void
Port::AccountQueue()
{
    int64_t now = ns3::Simulator::Now().GetPicoSeconds();
    q_area += static_cast<double>(data_bytes) * static_cast<double>(now - q_last);
    q_last = now;
}

void
Port::Pump()
{
    // Reentrant: device->Send may start a transmission whose PhyTxBegin calls
    // Pump again; in_device is counted before Send so both calls agree.
    while (in_device < 2)
    {
        ns3::Ptr<ns3::Packet> p = Next();
        if (!p)
        {
            return;
        }
        ++in_device;
        tx_bytes += p->GetSize() + kPppBytes;
        ++tx_packets;
        dev->Send(p, dev->GetBroadcast(), 0x0800);
    }
}

ns3::Ptr<ns3::Packet>
Port::Next()
{
    if (!ctrl.empty())
    {
        ns3::Ptr<ns3::Packet> p = ctrl.front();
        ctrl.pop_front();
        return p;
    }
    if (paused)
    {
        return nullptr;
    }
    int64_t now = ns3::Simulator::Now().GetPicoSeconds();
    // When the packet chosen now will start on the wire.
    int64_t start_at = in_device == 0 ? now : std::max(now, busy_until);
    size_t slots = qps.size() + 1;
    int64_t earliest = std::numeric_limits<int64_t>::max();
    for (size_t k = 0; k < slots; ++k)
    {
        size_t s = (rr + k) % slots;
        if (s == 0)
        {
            if (!data.empty())
            {
                rr = 1 % slots;
                return DequeueTransit();
            }
            continue;
        }
        Qp* q = qps[s - 1];
        if (!q->CanSend())
        {
            continue;
        }
        if (q->next_send > start_at)
        {
            earliest = std::min(earliest, q->next_send);
            continue;
        }
        rr = (s + 1) % slots;
        return q->MakePacket(start_at);
    }
    if (earliest != std::numeric_limits<int64_t>::max())
    {
        // A rate-limited queue pair becomes eligible later: try again then
        // (a packet handed over while the wire is busy starts when it frees).
        WakeAt(earliest);
    }
    return nullptr;
}

void
Port::WakeAt(int64_t t)
{
    int64_t now = ns3::Simulator::Now().GetPicoSeconds();
    if (t < now)
    {
        t = now;
    }
    if (wake.IsPending())
    {
        int64_t due = now + ns3::Simulator::GetDelayLeft(wake).GetPicoSeconds();
        if (due <= t)
        {
            return;
        }
        wake.Cancel();
    }
    wake = ns3::Simulator::Schedule(ns3::PicoSeconds(t - now), &Port::Pump, this);
}

ns3::Ptr<ns3::Packet>
Port::DequeueTransit()
{
    Transit t = data.front();
    data.pop_front();
    AccountQueue();
    data_bytes -= t.size;
    fab->ReleaseBuffer(this, t);
    const Config& cfg = fab->cfg;
    if (cfg.ecn && kmax > 0)
    {
        // RED on the instantaneous egress queue, as DCQCN switches mark
        // (Zhu et al. §3.1): always above Kmax, linearly up to Pmax between.
        double q = static_cast<double>(data_bytes);
        bool mark = false;
        if (q > kmax)
        {
            mark = true;
        }
        else if (q > kmin)
        {
            mark = fab->Uniform() < pmax * (q - kmin) / (kmax - kmin);
        }
        if (mark)
        {
            RoceHeader h;
            t.packet->RemoveHeader(h);
            if (!(h.flags & kFlagCe))
            {
                ++marks;
            }
            h.flags |= kFlagCe;
            t.packet->AddHeader(h);
        }
    }
    if (cfg.cc == kCcHpccPint)
    {
        StampPint(t.packet, t.size);
    }
    if (cfg.cc == kCcHpcc)
    {
        IntTag tag;
        if (t.packet->RemovePacketTag(tag))
        {
            if (tag.n < kMaxIntHops)
            {
                IntHop& hop = tag.hops[tag.n++];
                hop.ts = ns3::Simulator::Now().GetPicoSeconds();
                hop.tx_bytes = tx_bytes;
                hop.qlen = data_bytes;
                hop.rate = rate;
            }
            t.packet->AddPacketTag(tag);
        }
    }
    return t.packet;
}

void
Port::StampPint(ns3::Ptr<ns3::Packet> p, uint32_t size)
{
    // This port's utilization (HPCC-PINT artifact, switch-node.cc): an EWMA
    // with weight dt/T of the sample (queue / T + previous packet / dt) / B,
    // where T is the fabric's longest base RTT and B the port's rate; queues
    // under 256 bytes count as empty. The packet keeps the largest digest
    // of its path.
    int64_t now = ns3::Simulator::Now().GetPicoSeconds();
    double T = static_cast<double>(fab->max_base_rtt);
    double bytes_per_ps = rate / 8e12;
    if (pint_last_ts >= 0 && T > 0)
    {
        double dt = std::min(static_cast<double>(now - pint_last_ts), T);
        double queue = data_bytes >= 256 ? static_cast<double>(data_bytes) : 0.0;
        pint_u = pint_u * (T - dt) / T + queue * dt / (bytes_per_ps * T * T) +
                 pint_last_bytes / (bytes_per_ps * T);
    }
    pint_last_ts = now;
    pint_last_bytes = size + kPppBytes;
    PintTag tag;
    if (!p->RemovePacketTag(tag))
    {
        return; // not a PINT data packet
    }
    int power = fab->cfg.PintEncode(pint_u, fab->Uniform());
    if (power > tag.power)
    {
        tag.power = static_cast<int16_t>(power);
    }
    p->AddPacketTag(tag);
}

void
Port::OnTxBegin(ns3::Ptr<const ns3::Packet> p)
{
    busy_until = ns3::Simulator::Now().GetPicoSeconds() + TxTime(p->GetSize());
    Pump();
}

void
Port::OnTxEnd(ns3::Ptr<const ns3::Packet> p)
{
    // The device may not be given a packet from inside this trace (it is
    // still finishing the transmission); the next PhyTxBegin or event pumps.
    --in_device;
}

bool
Port::OnReceive(ns3::Ptr<ns3::NetDevice> device,
                ns3::Ptr<const ns3::Packet> p,
                uint16_t protocol,
                const ns3::Address& from)
{
    // The channel delivers a copy of the sent packet, ours to modify.
    fab->OnPacket(this, ns3::ConstCast<ns3::Packet>(p));
    return true;
}

} // namespace astra_ns3
