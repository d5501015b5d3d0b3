// Fabric: nodes, cables, per-flow routes, buffers and PFC, the run loop, monitors.
//
// Buffer and PFC (IEEE 802.1Qbb): every node has one shared buffer. A data
// packet that arrives to be forwarded is charged to its ingress port until it
// leaves. With PFC on, an ingress port whose charge exceeds the XOFF threshold
// sends XOFF to its peer and XON once it is back below XOFF - delta. The
// threshold is static, or dynamic as in shared-buffer switches (Choudhury &
// Hahne's dynamic threshold: alpha x the free shared buffer, where the shared
// buffer is what remains after every port's headroom is set aside). A port's
// headroom absorbs what is in flight while the XOFF travels and takes effect:
// two propagation delays of the cable at its rate plus five data frames
// (the frames the two devices hold and the one being received). A packet that
// finds the buffer full is dropped and counted, PFC or not.
#include "roce.h"

#include "ns3/drop-tail-queue.h"
#include "ns3/mac48-address.h"
#include "ns3/queue-size.h"

#include <algorithm>

namespace astra_ns3
{

Fabric::Fabric(const Config& c)
    : cfg(c),
      rng(c.seed),
      data_extra(c.DataExtra())
{
    // Monitors sample every packet's effect on queues and rates over time;
    // a fast-forward would show as a pause there. They get every packet.
    if (cfg.monitor_interval > 0)
    {
        cfg.fast_forward = false;
    }
}

Fabric::~Fabric()
{
    for (Port* p : ports)
    {
        delete p;
    }
}

double
Fabric::Uniform()
{
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

int
Fabric::AddNode(bool is_switch)
{
    NodeState n;
    n.node = ns3::CreateObject<ns3::Node>();
    n.is_switch = is_switch;
    nodes.push_back(n);
    return static_cast<int>(nodes.size()) - 1;
}

int
Fabric::AddCable(uint32_t link_ab, uint32_t link_ba, uint32_t a, uint32_t b,
                 double rate_ab, double rate_ba, int64_t delay,
                 double kmin_ab, double kmax_ab, double pmax_ab,
                 double kmin_ba, double kmax_ba, double pmax_ba)
{
    if (a >= nodes.size() || b >= nodes.size() || a == b)
    {
        error = "cable between unknown nodes " + std::to_string(a) + " and " + std::to_string(b);
        return -1;
    }
    uint32_t top = std::max(link_ab, link_ba);
    if (ports.size() <= top)
    {
        ports.resize(top + 1, nullptr);
    }
    if (ports[link_ab] || ports[link_ba])
    {
        error = "link id used twice";
        return -1;
    }
    ns3::Ptr<ns3::PointToPointChannel> channel = ns3::CreateObject<ns3::PointToPointChannel>();
    channel->SetAttribute("Delay", ns3::TimeValue(ns3::PicoSeconds(delay)));
    struct End
    {
        uint32_t link, node;
        double rate, kmin, kmax, pmax;
    } ends[2] = {{link_ab, a, rate_ab, kmin_ab, kmax_ab, pmax_ab},
                 {link_ba, b, rate_ba, kmin_ba, kmax_ba, pmax_ba}};
    Port* made[2];
    for (int k = 0; k < 2; ++k)
    {
        const End& e = ends[k];
        NodeState& n = nodes[e.node];
        Port* port = new Port();
        port->fab = this;
        port->id = e.link;
        port->node = e.node;
        port->index = static_cast<uint16_t>(n.ports.size());
        port->rate = e.rate;
        port->delay = delay;
        port->kmin = e.kmin;
        port->kmax = e.kmax;
        port->pmax = e.pmax;
        ns3::Ptr<ns3::PointToPointNetDevice> dev = ns3::CreateObject<ns3::PointToPointNetDevice>();
        dev->SetDataRate(ns3::DataRate(static_cast<uint64_t>(e.rate + 0.5)));
        dev->SetAddress(ns3::Mac48Address::Allocate());
        dev->SetMtu(65535);
        ns3::Ptr<ns3::DropTailQueue<ns3::Packet>> queue =
            ns3::CreateObject<ns3::DropTailQueue<ns3::Packet>>();
        queue->SetMaxSize(ns3::QueueSize("4p"));
        dev->SetQueue(queue);
        n.node->AddDevice(dev);
        dev->Attach(channel);
        // After AddDevice, which installs the node's own receive callback.
        dev->SetReceiveCallback(ns3::MakeCallback(&Port::OnReceive, port));
        dev->TraceConnectWithoutContext("PhyTxBegin", ns3::MakeCallback(&Port::OnTxBegin, port));
        dev->TraceConnectWithoutContext("PhyTxEnd", ns3::MakeCallback(&Port::OnTxEnd, port));
        port->dev = dev;
        n.ports.push_back(port);
        ports[e.link] = port;
        made[k] = port;
    }
    // Headroom at each end for what its peer sends after an XOFF.
    uint32_t frame = DataWire();
    for (int k = 0; k < 2; ++k)
    {
        Port* port = made[k];
        double in_rate = made[1 - k]->rate;
        uint64_t headroom = cfg.pfc_headroom;
        if (headroom == 0)
        {
            headroom = static_cast<uint64_t>(2.0 * delay * 1e-12 * in_rate / 8) + 5ull * frame;
        }
        port->headroom = headroom;
        nodes[port->node].headroom_total += headroom;
    }
    return 0;
}

int
Fabric::AddQp(uint32_t id, uint32_t src, uint32_t dst, const uint32_t* fwd, int nfwd,
              const uint32_t* rev, int nrev)
{
    if (id != qps.size())
    {
        error = "queue pair ids must be dense: got " + std::to_string(id) + ", expected " +
                std::to_string(qps.size());
        return -1;
    }
    if (nfwd < 1 || nrev < 1)
    {
        error = "queue pair " + std::to_string(id) + " has no route";
        return -1;
    }
    for (int k = 0; k < nfwd + nrev; ++k)
    {
        uint32_t link = k < nfwd ? fwd[k] : rev[k - nfwd];
        if (link >= ports.size() || !ports[link])
        {
            error = "queue pair " + std::to_string(id) + " routed over unknown link " + std::to_string(link);
            return -1;
        }
    }
    qps.emplace_back();
    Qp& q = qps.back();
    q.fab = this;
    q.id = id;
    q.src = src;
    q.dst = dst;
    q.route.assign(fwd, fwd + nfwd);
    q.ack_route.assign(rev, rev + nrev);
    q.route_hash = 1469598103934665603ull;
    for (uint32_t link : q.route)
    {
        q.route_hash = (q.route_hash ^ link) * 1099511628211ull;
    }
    // Base RTT: a full data frame store-and-forward on every hop out, an ACK back.
    uint32_t data_frame = DataWire();
    uint32_t ack_frame = AckWire();
    int64_t rtt = 0;
    for (uint32_t link : q.route)
    {
        rtt += ports[link]->delay + ports[link]->TxTime(data_frame);
    }
    for (uint32_t link : q.ack_route)
    {
        rtt += ports[link]->delay + ports[link]->TxTime(ack_frame);
    }
    q.Init(ports[q.route[0]], rtt);
    max_base_rtt = std::max(max_base_rtt, rtt);
    return 0;
}

int
Fabric::StartFlow(uint32_t id, uint32_t qp, uint64_t size)
{
    if (id != flows.size())
    {
        error = "message ids must be dense: got " + std::to_string(id) + ", expected " +
                std::to_string(flows.size());
        return -1;
    }
    if (qp >= qps.size())
    {
        error = "message " + std::to_string(id) + " on unknown queue pair " + std::to_string(qp);
        return -1;
    }
    flows.emplace_back();
    Flow& f = flows.back();
    f.fab = this;
    f.qp = &qps[qp];
    f.id = id;
    f.size = size;
    FfStart(&f);
    if (cfg.monitor_interval > 0 && !monitor_event_.IsPending())
    {
        monitor_event_ = ns3::Simulator::ScheduleNow(&Fabric::Sample, this);
    }
    return 0;
}

int
Fabric::Run(int64_t until)
{
    // Returns 1: completions are waiting; 0: reached `until`; 2: no events
    // left; 3: failed (see error).
    ns3::EventId until_event;
    int64_t now = ns3::Simulator::Now().GetPicoSeconds();
    if (until >= 0)
    {
        until_event = ns3::Simulator::Stop(ns3::PicoSeconds(std::max<int64_t>(until - now, 0)));
    }
    if (completed.empty() && error.empty())
    {
        ns3::Simulator::Run();
    }
    until_event.Cancel();
    stop_event_.Cancel();
    stop_pending_ = false;
    if (!error.empty())
    {
        return 3;
    }
    if (!completed.empty())
    {
        return 1;
    }
    if (until >= 0 && ns3::Simulator::Now().GetPicoSeconds() >= until)
    {
        return 0;
    }
    return 2;
}

void
Fabric::Complete(Flow* f)
{
    completed.push_back(f->id);
    if (!stop_pending_)
    {
        // Stop after every event already due now: completions at the same
        // instant go back together.
        stop_pending_ = true;
        stop_event_ = ns3::Simulator::Stop(ns3::Seconds(0));
    }
}

void
Fabric::Fail(const std::string& why)
{
    if (error.empty())
    {
        error = why;
    }
    ns3::Simulator::Stop();
}

uint64_t
Fabric::XoffThreshold(const NodeState& n) const
{
    if (cfg.pfc_xoff > 0)
    {
        return cfg.pfc_xoff;
    }
    double shared = static_cast<double>(cfg.buffer) - static_cast<double>(n.headroom_total);
    double free_shared = shared - static_cast<double>(n.buffer_used);
    return free_shared > 0 ? static_cast<uint64_t>(cfg.pfc_alpha * free_shared) : 0;
}

uint64_t
Fabric::XonDelta() const
{
    return cfg.pfc_xon_delta > 0 ? cfg.pfc_xon_delta : 2ull * (cfg.payload + kDataOverhead);
}

void
Fabric::OnPacket(Port* in, ns3::Ptr<ns3::Packet> p)
{
    RoceHeader h;
    p->PeekHeader(h);
    if (h.kind == kPfc)
    {
        in->SetPaused(h.flags & kFlagPause);
        return;
    }
    if (h.flow >= flows.size())
    {
        ++misrouted;
        return;
    }
    Flow& f = flows[h.flow];
    if (h.dst == in->node)
    {
        if (h.kind == kData)
        {
            f.OnData(p, h);
        }
        else
        {
            f.OnControl(p, h);
        }
        return;
    }
    Forward(in, p, h, h.kind == kData ? f.qp->route : f.qp->ack_route);
}

void
Fabric::Forward(Port* in, ns3::Ptr<ns3::Packet> p, const RoceHeader& h,
                const std::vector<uint32_t>& route)
{
    Port* out = nullptr;
    for (uint32_t link : route)
    {
        if (ports[link]->node == in->node)
        {
            out = ports[link];
            break;
        }
    }
    if (!out)
    {
        ++misrouted;
        return;
    }
    if (h.kind != kData)
    {
        out->SendControl(p);
        return;
    }
    NodeState& n = nodes[in->node];
    uint32_t size = p->GetSize();
    if (n.buffer_used + size > cfg.buffer)
    {
        ++in->drops;
        Changed(out);
        return;
    }
    n.buffer_used += size;
    n.max_buffer = std::max(n.max_buffer, n.buffer_used);
    in->ingress_bytes += size;
    if (cfg.pfc && !in->xoff && in->ingress_bytes > XoffThreshold(n))
    {
        SendPfc(in, true);
    }
    out->EnqueueTransit(p, size, in->index);
}

void
Fabric::ReleaseBuffer(Port* egress, const Transit& t)
{
    NodeState& n = nodes[egress->node];
    Port* in = n.ports[t.ingress];
    n.buffer_used -= t.size;
    in->ingress_bytes -= t.size;
    if (in->xoff)
    {
        uint64_t xoff = XoffThreshold(n);
        uint64_t delta = XonDelta();
        if (in->ingress_bytes == 0 || in->ingress_bytes + delta <= xoff)
        {
            SendPfc(in, false);
        }
    }
}

void
Fabric::SendPfc(Port* port, bool pause)
{
    port->xoff = pause;
    if (pause)
    {
        ++port->pauses_sent;
    }
    else
    {
        ++port->resumes_sent;
    }
    ns3::Ptr<ns3::Packet> p = ns3::Create<ns3::Packet>(0);
    RoceHeader h;
    h.kind = kPfc;
    h.flags = pause ? kFlagPause : 0;
    h.size = kPfcFrameBytes - kPppBytes;
    h.src = port->node;
    p->AddHeader(h);
    port->SendControl(p);
}

void
Fabric::Sample()
{
    int64_t now = ns3::Simulator::Now().GetPicoSeconds();
    for (Port* port : ports)
    {
        if (!port)
        {
            continue;
        }
        if (port->data_bytes > 0 || port->sampled_nonzero)
        {
            queue_samples.push_back(QueueSample{now, port->id, port->data_bytes});
            port->sampled_nonzero = port->data_bytes > 0;
        }
    }
    size_t keep = 0;
    for (Flow* f : active)
    {
        flow_samples.push_back(FlowSample{now, f->id, f->delivered_bytes, f->qp->rate});
        if (!(f->delivered && f->sender_done))
        {
            active[keep++] = f;
        }
    }
    active.resize(keep);
    if (!active.empty())
    {
        monitor_event_ = ns3::Simulator::Schedule(ns3::PicoSeconds(cfg.monitor_interval),
                                                  &Fabric::Sample, this);
    }
}

} // namespace astra_ns3
