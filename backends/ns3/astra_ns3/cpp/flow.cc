// Qp and Flow: RDMA RC queue pairs and the messages on them.
//
// A queue pair sends its messages in order (the next message's first packet
// follows the previous message's last), paced by one rate limiter that its
// congestion control sets; a new rate re-times the wait left (Qp::SetRate).
// Reliability is RoCE's go-back-N per message: the receiver accepts packets in
// order only, answers the first gap with a NACK, and the sender restarts from
// the NACKed PSN (or from the oldest unacknowledged one after a timeout).
//
// Congestion control:
//  * DCQCN reaction point (Zhu et al., SIGCOMM'15, §3.2): on a CNP,
//    Rt = Rc, Rc = Rc (1 - alpha/2), alpha = (1 - g) alpha + g; alpha decays by
//    (1 - g) every alpha timer without a CNP; the rate-increase timer and the
//    byte counter each count stages: fast recovery (Rc = (Rt + Rc)/2) for the
//    first F stages, then additive (Rt += R_AI), then hyper increase
//    (Rt += i R_HAI) once both counters passed F. As upstream's
//    CLAMP_TARGET_RATE 0, a CNP lowers Rt only if the rate rose since the last
//    cut (or on the first cut).
//  * DCQCN notification point: a CNP at most once per CNP interval per
//    message when data arrives CE-marked.
//  * HPCC (Li et al., SIGCOMM'19, Algorithm 1): per ACK, the utilization U from
//    the INT records of every hop, W = Wc / (U / eta) + W_AI (multiplicative
//    stage) or W = Wc + W_AI, Wc updated once per RTT of data; pacing rate
//    W / T where T is the base RTT.
//  * HPCC-PINT (Ben Basat et al., SIGCOMM'20, §4): the same window rule with
//    U read from the packet's digest (the largest per-port utilization on the
//    path, which the switches estimate themselves, port.cc), on a fraction
//    pint_prob of the ACKs.
//  * TIMELY (Mittal et al., SIGCOMM'15, Algorithm 1): once per window of data,
//    from the RTT of an ACKed packet (its timestamp echoed): the EWMA of RTT
//    differences over the minimum RTT is the gradient; below T_low or with a
//    gradient <= 0 the rate rises by delta (5 delta after 5 rises in a row,
//    hyper increase), above T_high it falls by beta (1 - T_high / RTT), else
//    by beta x gradient. As the HPCC artifact: update once per window, delta
//    scaled with line rate (10 Mb/s per 10 Gb/s).
//  * DCTCP over RoCE (Alizadeh et al., SIGCOMM'10, §3.1; the HPCC artifact's
//    rate-based form): ACKs echo CE; once per window alpha = (1 - g) alpha +
//    g F, F the fraction of marked ACKs; a marked ACK cuts the rate by
//    alpha / 2 at most once per window; a window without a cut adds one MTU
//    per base RTT; the window is the rate's share of the bandwidth-delay
//    product.
#include "roce.h"

#include <algorithm>
#include <cmath>

namespace astra_ns3
{

static int64_t
Now()
{
    return ns3::Simulator::Now().GetPicoSeconds();
}

// -- Qp ----------------------------------------------------------------------------------

void
Qp::Init(Port* first, int64_t rtt)
{
    port = first;
    line_rate = first->rate;
    rate = line_rate;
    target = line_rate;
    base_rtt = rtt;
    next_send = Now();
    window = line_rate / 8 * static_cast<double>(base_rtt) * 1e-12; // W_init = B T
    window_c = window;
}

void
Qp::Hold(int64_t ps)
{
    // The next packet goes when it would have after the skipped ones; DCQCN's
    // timers resume where they stood (the state is steady: nothing of it moves).
    next_send = std::max(next_send, Now());
    Shift(ps);
}

void
Qp::Shift(int64_t ps)
{
    next_send += ps;
    auto move = [this, ps](ns3::EventId& timer, void (Qp::*fire)()) {
        if (timer.IsPending())
        {
            int64_t left = ns3::Simulator::GetDelayLeft(timer).GetPicoSeconds();
            timer.Cancel();
            timer = ns3::Simulator::Schedule(ns3::PicoSeconds(std::max<int64_t>(left + ps, 0)), fire, this);
        }
    };
    move(rate_event, &Qp::OnRateTimer);
    move(alpha_event, &Qp::OnAlphaTimer);
}

void
Qp::Add(Flow* f)
{
    f->qp_base = sent_total;
    to_send.push_back(f);
    open.push_back(f);
    if (!in_port)
    {
        in_port = true;
        port->qps.push_back(this);
        fab->FfAdd(this);
    }
    if (!ff_deferred)
    {
        port->Pump();
    }
}

void
Qp::Resend(Flow* f)
{
    // The message goes back to the head of the line: its PSNs precede those
    // of every message queued after it.
    if (std::find(to_send.begin(), to_send.end(), f) == to_send.end())
    {
        to_send.insert(to_send.begin(), f);
    }
    port->Pump();
}

void
Qp::Close(Flow* f)
{
    open.erase(std::remove(open.begin(), open.end(), f), open.end());
    to_send.erase(std::remove(to_send.begin(), to_send.end(), f), to_send.end());
    if (open.empty() && in_port)
    {
        in_port = false;
        port->RemoveQp(this);
    }
}

bool
Qp::CanSend() const
{
    if (to_send.empty())
    {
        return false;
    }
    int cc = fab->cfg.cc;
    if (cc == kCcHpcc || cc == kCcHpccPint || cc == kCcDctcp)
    {
        uint64_t unacked = 0;
        for (const Flow* f : open)
        {
            unacked += f->snd_nxt - f->snd_una;
        }
        return unacked == 0 || static_cast<double>(unacked) * fab->cfg.payload < window;
    }
    return true;
}

ns3::Ptr<ns3::Packet>
Qp::MakePacket(int64_t start_at)
{
    const Config& cfg = fab->cfg;
    Flow* f = to_send.front();
    ns3::Ptr<ns3::Packet> p = f->MakePacket();
    if (f->snd_nxt >= f->npkts)
    {
        to_send.erase(to_send.begin());
        if (!to_send.empty())
        {
            // The next message starts: a pattern seen before may jump it at once.
            fab->Changed(this);
        }
    }
    ++sent_total;
    if (ff_count++ == 0)
    {
        ff_first = start_at;
        ff_cc_min = ff_cc_max = rate;
    }
    ff_cc_min = std::min(ff_cc_min, rate);
    ff_cc_max = std::max(ff_cc_max, rate);
    ff_last = start_at;
    uint32_t wire = p->GetSize() + kPppBytes;
    // Pace at the current rate from when this packet starts on the wire.
    next_send = std::max(next_send, start_at) +
                static_cast<int64_t>(static_cast<double>(wire) * 8e12 / rate + 0.5);
    if (cfg.cc == kCcDcqcn && rate < line_rate)
    {
        b_bytes += wire;
        if (b_bytes >= cfg.byte_counter)
        {
            b_bytes -= cfg.byte_counter;
            ++b_stage;
            RateIncrease();
        }
    }
    return p;
}

void
Qp::OnCnp()
{
    const Config& cfg = fab->cfg;
    ++cnps_received;
    if (cfg.clamp_target || t_stage > 0 || b_stage > 0 || target >= line_rate)
    {
        target = rate;
    }
    SetRate(std::max(cfg.min_rate, rate * (1 - alpha / 2)));
    alpha = (1 - cfg.dcqcn_g) * alpha + cfg.dcqcn_g;
    cnp_in_period = true;
    t_stage = 0;
    b_stage = 0;
    b_bytes = 0;
    rate_event.Cancel();
    rate_event = ns3::Simulator::Schedule(ns3::PicoSeconds(cfg.rate_timer), &Qp::OnRateTimer, this);
    if (!alpha_event.IsPending())
    {
        alpha_event =
            ns3::Simulator::Schedule(ns3::PicoSeconds(cfg.alpha_timer), &Qp::OnAlphaTimer, this);
    }
}

void
Qp::OnAlphaTimer()
{
    const Config& cfg = fab->cfg;
    if (!cnp_in_period)
    {
        alpha *= 1 - cfg.dcqcn_g;
    }
    cnp_in_period = false;
    // Only while the QP has traffic and the rate has not fully recovered:
    // a finished simulation must run out of events.
    if (in_port && rate < line_rate)
    {
        alpha_event =
            ns3::Simulator::Schedule(ns3::PicoSeconds(cfg.alpha_timer), &Qp::OnAlphaTimer, this);
    }
}

void
Qp::OnRateTimer()
{
    ++t_stage;
    RateIncrease();
    if (in_port && rate < line_rate)
    {
        rate_event = ns3::Simulator::Schedule(ns3::PicoSeconds(fab->cfg.rate_timer),
                                              &Qp::OnRateTimer, this);
    }
}

void
Qp::RateIncrease()
{
    const Config& cfg = fab->cfg;
    int hi = std::max(t_stage, b_stage);
    int lo = std::min(t_stage, b_stage);
    if (hi < cfg.fast_recovery)
    {
        // fast recovery: the target stays
    }
    else if (lo > cfg.fast_recovery)
    {
        target += (lo - cfg.fast_recovery) * cfg.rate_hai;
    }
    else
    {
        target += cfg.rate_ai;
    }
    target = std::min(target, line_rate);
    SetRate(std::min(line_rate, (target + rate) / 2));
}

void
Qp::SetRate(double new_rate)
{
    // The rate limiter's wait for the next packet is re-timed at the new rate: the part
    // of the last packet's gap still to go scales by old / new, as a token bucket owes
    // the same bits at another rate. The HPCC artifact's RdmaHw::ChangeRate (upstream's
    // ns-3 backend) re-times the gap too, by the whole packet's time at the new rate less
    // that at the old; that also shifts a gap long since over, which makes HPCC's
    // per-ACK rate changes unfair (two senders into one port at 33 / 59 Gbps, 46 / 46
    // re-timing what is left). Without any re-timing, a queue pair cut to the minimum
    // rate (a 4 KB packet every 328 us at 100 Mb/s) waits out that gap after its rate
    // has recovered.
    if (new_rate == rate)
    {
        return;
    }
    int64_t now = Now();
    if (next_send > now)
    {
        next_send = now + static_cast<int64_t>(static_cast<double>(next_send - now) * rate / new_rate + 0.5);
    }
    bool sooner = new_rate > rate;
    rate = new_rate;
    if (in_port && sooner)
    {
        port->Pump();
    }
}

void
Qp::OnHpccAck(const IntTag& tag, uint64_t ack_seq)
{
    const Config& cfg = fab->cfg;
    if (tag.n == 0)
    {
        return;
    }
    if (!have_int || last_int.n != tag.n)
    {
        last_int = tag;
        have_int = true;
        return;
    }
    double T = static_cast<double>(base_rtt);
    double umax = 0;
    double tau = 0;
    for (int i = 0; i < tag.n; ++i)
    {
        const IntHop& cur = tag.hops[i];
        const IntHop& old = last_int.hops[i];
        double dt = static_cast<double>(cur.ts - old.ts);
        if (dt <= 0)
        {
            continue;
        }
        double bw = cur.rate / 8e12; // bytes per ps
        double tx_rate = static_cast<double>(cur.tx_bytes - old.tx_bytes) / dt;
        double qlen = static_cast<double>(std::min(cur.qlen, old.qlen));
        double ui = qlen / (bw * T) + tx_rate / bw;
        if (ui > umax)
        {
            umax = ui;
            tau = dt;
        }
    }
    last_int = tag;
    if (tau <= 0)
    {
        return;
    }
    tau = std::min(tau, T);
    u = (1 - tau / T) * u + tau / T * umax;
    SetWindow(u, ack_seq);
}

void
Qp::SetWindow(double utilization, uint64_t ack_seq)
{
    // HPCC's window rule (Algorithm 1): multiplicative towards eta while over it
    // or past max_stage additive steps, else additive; Wc moves once per RTT.
    const Config& cfg = fab->cfg;
    double T = static_cast<double>(base_rtt);
    double w_ai = cfg.hpcc_rate_ai / 8 * T * 1e-12;
    double w_init = line_rate / 8 * T * 1e-12;
    bool update = ack_seq > last_update_seq;
    double w;
    if (utilization >= cfg.hpcc_eta || inc_stage >= cfg.hpcc_max_stage)
    {
        w = window_c / (std::max(utilization, 1e-9) / cfg.hpcc_eta) + w_ai;
        if (update)
        {
            inc_stage = 0;
        }
    }
    else
    {
        w = window_c + w_ai;
        if (update)
        {
            ++inc_stage;
        }
    }
    w = std::max(std::min(w, w_init), static_cast<double>(kDataOverhead));
    if (update)
    {
        window_c = w;
        last_update_seq = sent_total;
    }
    window = w;
    SetRate(std::max(cfg.min_rate, std::min(line_rate, w * 8 / (T * 1e-12))));
}

void
Qp::OnPintAck(const PintTag& tag, uint64_t ack_seq)
{
    const Config& cfg = fab->cfg;
    if (tag.power < 0 || (cfg.pint_prob < 1 && fab->Uniform() >= cfg.pint_prob))
    {
        return;
    }
    SetWindow(cfg.PintDecode(tag.power), ack_seq);
}

void
Qp::OnTimelyAck(int64_t rtt, uint64_t ack_seq)
{
    const Config& cfg = fab->cfg;
    if (prev_rtt < 0)
    {
        prev_rtt = rtt;
        last_update_seq = sent_total;
        return;
    }
    if (ack_seq <= last_update_seq)
    {
        return;
    }
    double new_diff = static_cast<double>(rtt - prev_rtt);
    prev_rtt = rtt;
    last_update_seq = sent_total;
    rtt_diff = (1 - cfg.timely_alpha) * rtt_diff + cfg.timely_alpha * new_diff;
    double gradient = rtt_diff / static_cast<double>(cfg.timely_min_rtt);
    bool increase = false;
    double factor = 1;
    if (rtt < cfg.timely_t_low)
    {
        increase = true;
    }
    else if (rtt > cfg.timely_t_high)
    {
        factor = 1 - cfg.timely_beta * (1 - static_cast<double>(cfg.timely_t_high) / rtt);
    }
    else if (gradient <= 0)
    {
        increase = true;
    }
    else
    {
        factor = std::max(0.0, 1 - cfg.timely_beta * gradient);
    }
    if (increase)
    {
        double delta = cfg.timely_rate_ai * line_rate / 10e9;
        SetRate(std::min(line_rate,
                         rate + (inc_stage < cfg.timely_hai_after ? 1 : cfg.timely_hai_factor) * delta));
        ++inc_stage;
    }
    else
    {
        SetRate(std::max(cfg.min_rate, rate * factor));
        inc_stage = 0;
    }
}

void
Qp::OnDctcpAck(bool marked, uint64_t ack_seq)
{
    const Config& cfg = fab->cfg;
    ++window_acks;
    window_marks += marked ? 1 : 0;
    if (cwr && ack_seq > cwr_until)
    {
        cwr = false;
    }
    bool new_window = ack_seq > last_update_seq;
    if (new_window)
    {
        double fraction = static_cast<double>(window_marks) / static_cast<double>(window_acks);
        dctcp_alpha = (1 - cfg.dctcp_g) * dctcp_alpha + cfg.dctcp_g * fraction;
        window_acks = window_marks = 0;
        last_update_seq = sent_total;
    }
    double T = static_cast<double>(base_rtt) * 1e-12; // s
    if (marked && !cwr)
    {
        SetRate(std::max(cfg.min_rate, rate * (1 - dctcp_alpha / 2)));
        cwr = true;
        cwr_until = sent_total;
    }
    else if (new_window && !cwr)
    {
        SetRate(std::min(line_rate, rate + cfg.payload * 8.0 / T)); // one MTU per RTT
    }
    window = rate / 8 * T;
}

// -- Flow --------------------------------------------------------------------------------

uint32_t
Flow::Payload(uint32_t psn) const
{
    uint64_t p = fab->cfg.payload;
    uint64_t first = static_cast<uint64_t>(psn) * p;
    return first >= size ? 0 : static_cast<uint32_t>(std::min<uint64_t>(p, size - first));
}

void
Flow::Start()
{
    const Config& cfg = fab->cfg;
    start = Now();
    last_progress = start;
    npkts = size == 0 ? 1 : static_cast<uint32_t>((size + cfg.payload - 1) / cfg.payload);
    fab->active.push_back(this);
    ArmRto();
    qp->Add(this);
}

ns3::Ptr<ns3::Packet>
Flow::MakePacket()
{
    const Config& cfg = fab->cfg;
    uint32_t psn = snd_nxt++;
    if (psn == snd_una)
    {
        last_progress = std::max(last_progress, Now()); // the pipe was empty: nothing was late
    }
    uint32_t payload = Payload(psn);
    ns3::Ptr<ns3::Packet> p = ns3::Create<ns3::Packet>(payload);
    RoceHeader h;
    h.kind = kData;
    h.size = kDataOverhead - kPppBytes + fab->data_extra;
    h.src = qp->src;
    h.dst = qp->dst;
    h.flow = id;
    h.psn = psn;
    p->AddHeader(h);
    if (cfg.cc == kCcHpcc)
    {
        p->AddPacketTag(IntTag());
    }
    else if (cfg.cc == kCcHpccPint)
    {
        p->AddPacketTag(PintTag());
    }
    else if (cfg.cc == kCcTimely)
    {
        TimestampTag ts;
        ts.ts = Now();
        p->AddPacketTag(ts);
    }
    ++packets_sent;
    return p;
}

void
Flow::SendBack(uint8_t kind, uint32_t psn, ns3::Ptr<ns3::Packet> data)
{
    // An ACK answering a data packet echoes what its congestion control reads:
    // HPCC's INT records, PINT's digest, TIMELY's timestamp, DCTCP's CE mark.
    const Config& cfg = fab->cfg;
    ns3::Ptr<ns3::Packet> p = ns3::Create<ns3::Packet>(0);
    RoceHeader h;
    h.kind = kind;
    h.size = (kind == kCnp ? kCnpOverhead : kAckOverhead) + (data ? fab->data_extra : 0) - kPppBytes;
    h.src = qp->dst;
    h.dst = qp->src;
    h.flow = id;
    h.psn = psn;
    if (data && cfg.cc == kCcDctcp)
    {
        RoceHeader dh;
        data->PeekHeader(dh);
        h.flags |= dh.flags & kFlagCe;
    }
    p->AddHeader(h);
    if (data)
    {
        IntTag int_tag;
        PintTag pint_tag;
        TimestampTag ts_tag;
        if (cfg.cc == kCcHpcc && data->PeekPacketTag(int_tag))
        {
            p->AddPacketTag(int_tag);
        }
        else if (cfg.cc == kCcHpccPint && data->PeekPacketTag(pint_tag))
        {
            p->AddPacketTag(pint_tag);
        }
        else if (cfg.cc == kCcTimely && data->PeekPacketTag(ts_tag))
        {
            p->AddPacketTag(ts_tag);
        }
    }
    fab->ports[qp->ack_route[0]]->SendControl(p);
}

void
Flow::OnData(ns3::Ptr<ns3::Packet> p, const RoceHeader& h)
{
    const Config& cfg = fab->cfg;
    int64_t now = Now();
    if (cfg.cc == kCcDcqcn && (h.flags & kFlagCe) && now - last_cnp >= cfg.cnp_interval)
    {
        last_cnp = now;
        ++cnps_sent;
        SendBack(kCnp, h.psn);
    }
    if (h.psn == expected)
    {
        if (qp->ff_rx_count++ == 0)
        {
            qp->ff_rx_first = now;
        }
        qp->ff_rx_last = now;
        ++expected;
        delivered_bytes += Payload(h.psn);
        nack_pending = false;
        bool last = expected == npkts;
        if (last && !delivered)
        {
            delivered = true;
            finish = now;
            fab->Complete(this);
        }
        if (++since_ack >= cfg.ack_interval || last)
        {
            since_ack = 0;
            SendBack(kAck, expected, p);
        }
    }
    else if (h.psn > expected && !nack_pending)
    {
        nack_pending = true;
        SendBack(kNack, expected);
    }
    else if (h.psn < expected && delivered)
    {
        // A retransmission after everything arrived: the sender missed the end.
        SendBack(kAck, expected);
    }
}

void
Flow::OnControl(ns3::Ptr<ns3::Packet> p, const RoceHeader& h)
{
    if (h.kind == kCnp)
    {
        ++cnps_received;
        if (fab->cfg.cc == kCcDcqcn)
        {
            qp->OnCnp();
        }
        return;
    }
    if (sender_done)
    {
        return;
    }
    if (h.psn > snd_una)
    {
        snd_una = h.psn;
        last_progress = Now();
        timeouts_in_row = 0;
        if (snd_nxt < snd_una)
        {
            snd_nxt = snd_una;
        }
    }
    if (h.kind == kAck)
    {
        int cc = fab->cfg.cc;
        uint64_t ack_seq = qp_base + h.psn;
        IntTag int_tag;
        PintTag pint_tag;
        TimestampTag ts_tag;
        if (cc == kCcHpcc && p->PeekPacketTag(int_tag))
        {
            qp->OnHpccAck(int_tag, ack_seq);
        }
        else if (cc == kCcHpccPint && p->PeekPacketTag(pint_tag))
        {
            qp->OnPintAck(pint_tag, ack_seq);
        }
        else if (cc == kCcTimely && p->PeekPacketTag(ts_tag))
        {
            qp->OnTimelyAck(Now() - ts_tag.ts, ack_seq);
        }
        else if (cc == kCcDctcp)
        {
            qp->OnDctcpAck(h.flags & kFlagCe, ack_seq);
        }
    }
    if (snd_una >= npkts)
    {
        Finish();
        return;
    }
    if (h.kind == kNack && h.psn >= snd_una && h.psn < snd_nxt)
    {
        GoBack(h.psn);
        return;
    }
    qp->port->Pump(); // an ACK may have opened the window
}

void
Flow::GoBack(uint32_t psn)
{
    retransmits += snd_nxt - psn;
    snd_nxt = psn;
    fab->Changed(qp);
    last_progress = Now();
    qp->Resend(this);
}

void
Flow::Finish()
{
    sender_done = true;
    rto_event.Cancel();
    qp->Close(this);
    if (qp->to_send.empty())
    {
        fab->Changed(qp); // the queue pair stops sending: the contention pattern changes
    }
    qp->port->Pump();
}

void
Flow::ArmRto()
{
    int64_t due = last_progress + fab->cfg.rto - Now();
    rto_event =
        ns3::Simulator::Schedule(ns3::PicoSeconds(std::max<int64_t>(due, 0)), &Flow::OnRto, this);
}

void
Flow::OnRto()
{
    if (sender_done)
    {
        return;
    }
    if (snd_una == snd_nxt)
    {
        last_progress = Now(); // nothing in flight, nothing late (waiting its turn, or paced)
    }
    else if (Now() - last_progress >= fab->cfg.rto)
    {
        if (++timeouts_in_row > fab->cfg.max_timeouts)
        {
            fab->Fail("message " + std::to_string(id) + " from node " + std::to_string(qp->src) +
                      " to node " + std::to_string(qp->dst) + " made no progress after " +
                      std::to_string(fab->cfg.max_timeouts) + " retransmission timeouts");
            return;
        }
        ++timeouts;
        GoBack(snd_una);
    }
    ArmRto();
}

} // namespace astra_ns3
