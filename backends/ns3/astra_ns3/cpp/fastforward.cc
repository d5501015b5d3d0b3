// Steady-state fast-forward: skip the packets of a fabric whose flows have
// converged, as Wormhole does (Long et al., NSDI 2026, arXiv 2602.10615: LLM
// traffic spends most of its packets in steady states of a few contention
// patterns; jump every flow to the next change).
//
// The fabric keeps a clock, ns-3's time plus `skipped`; every time the model
// hands out (flow start and finish, monitor samples, Run's `until`) is on that
// clock. A fast-forward of dt ps removes, from the message each sending queue
// pair is working on, the packets it would have sent in dt at its measured
// rate, and adds dt to `skipped`. Nothing else moves: queues, packets on the
// wires, congestion-control state and timers stay as they are, which is what
// "steady" means (the state at t + dt is the state at t, with every message
// further along). The skipped packets count as sent and delivered (Flow's
// ff_packets and ff_bytes, the ports' ff_tx_bytes with their ACKs), so
// traffic counters add up as if the packets had been simulated.
//
// Steady. A check runs at the end of every measurement window (ns-3 time):
//  * every queue pair with data queued sent at least kFfMinPackets packets in
//    the window, and its rate (packets between the first and the last one's
//    wire start) is within `ff_tolerance` of the previous window's;
//  * every port's time-averaged data queue is within `ff_tolerance` (plus an
//    eighth of a frame) of the previous window's: no queue grows or drains;
//  * no port is paused, and since the windows began no message started or
//    ended, no PFC pause or resume, no drop and no retransmission happened
//    (Fabric::Changed restarts the windows);
//  * no queue pair is in its tail (all sent, waiting for ACKs).
// A window starts at one base RTT of the fabric's longest route, longer where
// a port's queue pairs share it (each should send kFfMinPackets), and doubles
// after every unsteady check (up to kFfMaxWindows base windows), so that a
// congestion control that oscillates is compared over its cycle. Where a
// state never holds (PFC storms, a CC that keeps moving, a queue pair paced
// too slowly to measure) the model keeps simulating packets.
//
// The jump. dt is the largest time in which no sending message comes within
// kFfMarginRtts base RTTs (and kFfMarginPackets packets) of its last packet,
// bounded by the caller's next event (Run's `until`): the end of a message
// and everything after it is simulated packet by packet. Every queue pair
// then skips floor(rate x dt) packets. CNPs and ECN marks seen in the last
// window are extrapolated over dt into the counters.
#include "roce.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace astra_ns3
{

namespace
{
constexpr uint64_t kFfMinPackets = 8;  // packets per queue pair per window to trust its rate
constexpr int64_t kFfMaxWindows = 64;  // the longest window, in first windows
constexpr uint64_t kFfMarginPackets = 4; // left to simulate at the end of a message
constexpr size_t kFfMemoMax = 1 << 16; // contention patterns remembered
constexpr double kFfCycleRtts = 32;    // the shortest window over which a moving CC rate is averaged

int64_t
NowPs()
{
    return ns3::Simulator::Now().GetPicoSeconds();
}

// Whether q's rate may change without a new event: HPCC, PINT, TIMELY and
// DCTCP adjust on every ACK or window; DCQCN only after a CNP (it then
// recovers by timers until back at line rate); no CC never.
bool
CcMayMove(const Qp& q)
{
    int cc = q.fab->cfg.cc;
    if (cc == kCcNone)
    {
        return false;
    }
    if (cc == kCcDcqcn)
    {
        return q.ff_cc_min < q.line_rate || q.ff_cc_max < q.line_rate || q.rate < q.line_rate;
    }
    return true;
}
} // namespace

void
Fabric::FfAdd(Qp* q)
{
    if (cfg.fast_forward && !q->ff_listed)
    {
        q->ff_listed = true;
        ff_qps_.push_back(q);
    }
}

void
Fabric::Changed()
{
    if (!cfg.fast_forward || ff_changed_)
    {
        return;
    }
    ff_changed_ = true;
    FfSchedule(0); // restart the windows at this instant, after the events due now
}

void
Fabric::FfSchedule(int64_t delay)
{
    ff_event_.Cancel();
    ff_event_ = ns3::Simulator::Schedule(ns3::PicoSeconds(delay), &Fabric::FfCheck, this);
}

void
Fabric::FfGather()
{
    // The queue pairs with messages, by id, and the ports their routes cross;
    // the contention pattern's signature (FNV-1a over the queue pair ids).
    size_t keep = 0;
    for (Qp* q : ff_qps_)
    {
        if (q->in_port)
        {
            ff_qps_[keep++] = q;
        }
        else
        {
            q->ff_listed = false;
        }
    }
    ff_qps_.resize(keep);
    std::sort(ff_qps_.begin(), ff_qps_.end(), [](const Qp* a, const Qp* b) { return a->id < b->id; });
    ++ff_stamp_;
    ff_ports_.clear();
    uint64_t h = 1469598103934665603ull;
    for (Qp* q : ff_qps_)
    {
        h = (h ^ q->id) * 1099511628211ull;
        for (uint32_t link : q->open.front()->fwd)
        {
            Port* port = ports[link];
            if (port->ff_stamp != ff_stamp_)
            {
                port->ff_stamp = ff_stamp_;
                port->ff_sharing = 0;
                ff_ports_.push_back(port);
            }
            ++port->ff_sharing;
        }
    }
    ff_signature_ = h;
}

void
Fabric::FfCheck()
{
    if (ff_changed_)
    {
        // Let one base RTT of the longest route pass (the new messages' first
        // packets and ACKs reach their ends) before the windows start.
        ff_changed_ = false;
        ff_settling_ = true;
        FfGather();
        if (ff_qps_.empty())
        {
            ff_settling_ = false;
            return; // idle: the next message restarts the checks
        }
        int64_t settle = 0;
        for (Qp* q : ff_qps_)
        {
            settle = std::max(settle, q->base_rtt);
        }
        FfQuickJump();
        FfSchedule(settle);
        return;
    }
    if (ff_settling_)
    {
        // Restart every window now. The first window lasts long enough for
        // every queue pair to send kFfMinPackets frames where it shares a
        // port with the most others.
        ff_settling_ = false;
        int64_t frame = cfg.payload + kDataOverhead + data_extra;
        ff_base_window_ = 1000;
        for (Port* port : ff_ports_)
        {
            int64_t share = static_cast<int64_t>(kFfMinPackets + 1) * port->ff_sharing * port->TxTime(frame);
            ff_base_window_ = std::max(ff_base_window_, share);
            port->AccountQueue();
            port->q_area_start = port->q_area;
            port->q_prev_mean = -1;
            port->marks_start = port->marks;
        }
        for (Qp* q : ff_qps_)
        {
            q->ff_count = 0;
            q->ff_prev_rate = -1;
            q->ff_cnps_start = q->cnps_received;
        }
        // A pattern seen steady before: its rates and queues stand for the
        // previous window, so one window that agrees with them suffices.
        ff_memo_hit_ = false;
        auto seen = ff_memo_.find(ff_signature_);
        if (seen != ff_memo_.end() && seen->second.rates.size() == ff_qps_.size() &&
            seen->second.queue_means.size() == ff_ports_.size())
        {
            for (size_t k = 0; k < ff_qps_.size(); ++k)
            {
                ff_qps_[k]->ff_prev_rate = seen->second.rates[k];
            }
            for (size_t k = 0; k < ff_ports_.size(); ++k)
            {
                ff_ports_[k]->q_prev_mean = seen->second.queue_means[k];
            }
            ff_memo_hit_ = true;
        }
        ff_window_ = ff_base_window_;
        ff_window_start_ = NowPs();
        ff_prev_length_ = 0;
        FfSchedule(ff_window_);
        return;
    }
    std::vector<double> previous;
    if (ff_memo_hit_)
    {
        for (Qp* q : ff_qps_)
        {
            previous.push_back(q->ff_prev_rate);
        }
    }
    if (FfSteady())
    {
        if (ff_memo_hit_)
        {
            // Jump at the memo's rates, measured over a longer steady time.
            for (size_t k = 0; k < ff_qps_.size(); ++k)
            {
                ff_qps_[k]->ff_prev_rate = previous[k];
            }
        }
        else
        {
            if (ff_memo_.size() >= kFfMemoMax)
            {
                ff_memo_.clear();
            }
            FfPattern& pattern = ff_memo_[ff_signature_];
            pattern.rates.clear();
            pattern.queue_means.clear();
            for (Qp* q : ff_qps_)
            {
                pattern.rates.push_back(q->ff_prev_rate);
            }
            pattern.quiet = true;
            for (Port* port : ff_ports_)
            {
                pattern.queue_means.push_back(port->q_prev_mean);
                pattern.quiet = pattern.quiet && port->marks_window == 0;
            }
            for (Qp* q : ff_qps_)
            {
                pattern.quiet = pattern.quiet && q->ff_cnps_window == 0 && !CcMayMove(*q);
            }
        }
        FfJump();
    }
    else
    {
        ff_window_ = std::min(ff_window_ * 2, ff_base_window_ * kFfMaxWindows);
    }
    ff_memo_hit_ = false;
    FfSchedule(ff_window_);
}

bool
Fabric::FfQuickJump()
{
    // A quiet pattern seen before (rate-based queue pairs at line rate, no
    // congestion signal): its rates hold from the messages' first packets, so
    // jump at once rather than after a window. The first round trip's
    // pipeline fill is then simulated after the jump instead of before it.
    auto seen = ff_memo_.find(ff_signature_);
    if (seen == ff_memo_.end() || !seen->second.quiet || seen->second.rates.size() != ff_qps_.size())
    {
        return false;
    }
    for (Port* port : ff_ports_)
    {
        if (port->paused)
        {
            return false;
        }
        port->marks_window = 0;
    }
    for (size_t k = 0; k < ff_qps_.size(); ++k)
    {
        Qp* q = ff_qps_[k];
        q->ff_cc_min = q->ff_cc_max = q->rate;
        if (q->to_send.empty() || CcMayMove(*q))
        {
            return false;
        }
    }
    for (size_t k = 0; k < ff_qps_.size(); ++k)
    {
        ff_qps_[k]->ff_prev_rate = seen->second.rates[k];
        ff_qps_[k]->ff_cnps_window = 0;
    }
    ff_window_ = 1000; // jumps shorter than 1 ns are not worth it
    uint64_t before = ff_jumps;
    FfJump();
    return ff_jumps > before;
}

bool
Fabric::FfSteady()
{
    // Compares this window with the previous one and starts the next window.
    int64_t now = NowPs();
    double length = static_cast<double>(std::max<int64_t>(now - ff_window_start_, 1));
    double tol = cfg.ff_tolerance;
    double slack = (cfg.payload + kDataOverhead + data_extra) / 8.0;
    bool steady = true;
    for (Port* port : ff_ports_)
    {
        steady = steady && !port->paused;
        port->AccountQueue();
        double mean = (port->q_area - port->q_area_start) / length;
        if (port->q_prev_mean < 0 ||
            std::fabs(mean - port->q_prev_mean) > tol * std::max(mean, port->q_prev_mean) + slack)
        {
            steady = false;
        }
        port->q_prev_mean = mean;
        port->q_area_start = port->q_area;
        port->marks_window = port->marks - port->marks_start;
        port->marks_start = port->marks;
    }
    for (Qp* q : ff_qps_)
    {
        if (q->to_send.empty())
        {
            steady = false; // its last packets are out: a message is about to end
        }
        double rate = -1;
        if (q->ff_count >= kFfMinPackets && q->ff_last > q->ff_first)
        {
            rate = static_cast<double>(q->ff_count - 1) / static_cast<double>(q->ff_last - q->ff_first);
        }
        if (rate < 0 || q->ff_prev_rate < 0 ||
            std::fabs(rate - q->ff_prev_rate) > tol * std::max(rate, q->ff_prev_rate))
        {
            steady = false;
        }
        else if (CcMayMove(*q) && length < kFfCycleRtts * static_cast<double>(q->base_rtt))
        {
            // A congestion control that may move: trust mean rates only over
            // windows that span several of its cycles.
            steady = false;
        }
        else if (q->ff_prev_rate > 0 && ff_prev_length_ > 0)
        {
            // The jump's rate: the mean over both windows.
            double before = static_cast<double>(ff_prev_length_);
            rate = (rate * length + q->ff_prev_rate * before) / (length + before);
        }
        q->ff_prev_rate = rate;
        q->ff_count = 0;
        q->ff_cnps_window = q->cnps_received - q->ff_cnps_start;
        q->ff_cnps_start = q->cnps_received;

    }
    ff_window_start_ = now;
    ff_prev_length_ = static_cast<int64_t>(length);
    return steady;
}

void
Fabric::FfJump()
{
    // Called right after FfSteady: every queue pair's ff_prev_rate is its
    // rate over the window just ended (packets per ps), its ff_cnps_window and
    // the ports' marks_window that window's CNPs and ECN marks.
    int64_t clock = Clock();
    // The queue pair whose message is nearest its end bounds the jump, which
    // is a whole number of its packet times so that its phase is kept.
    double dt = std::numeric_limits<double>::infinity();
    for (Qp* q : ff_qps_)
    {
        Flow* f = q->to_send.front();
        double unsent = static_cast<double>(f->npkts - f->snd_nxt);
        double packets = std::floor(unsent - static_cast<double>(kFfMarginPackets));
        dt = std::min(dt, packets / q->ff_prev_rate);

    }
    if (run_until_ >= 0)
    {
        dt = std::min(dt, static_cast<double>(run_until_ - clock));
    }
    if (!(dt >= static_cast<double>(ff_window_)) || !std::isfinite(dt))
    {
        return; // too short to be worth it
    }
    int64_t jump = static_cast<int64_t>(dt);
    double scale = static_cast<double>(jump) / static_cast<double>(ff_window_);
    uint64_t data_wire = cfg.payload + kDataOverhead + data_extra;
    uint64_t ack_wire = kAckOverhead + data_extra;
    if (cfg.monitor_interval > 0)
    {
        for (Flow* f : active) // the monitor's list
        {
            f->ff_last_jump_bytes = 0;
        }
    }
    for (Port* port : ff_ports_)
    {
        port->ff_marks += static_cast<uint64_t>(static_cast<double>(port->marks_window) * scale + 0.5);
    }
    for (Qp* q : ff_qps_)
    {
        Flow* f = q->to_send.front();
        double exact = q->ff_prev_rate * static_cast<double>(jump);
        uint64_t k = static_cast<uint64_t>(exact + 0.5);
        k = std::min<uint64_t>(k, f->npkts - f->snd_nxt - 1);
        uint64_t cnps = static_cast<uint64_t>(static_cast<double>(q->ff_cnps_window) * scale + 0.5);
        f->ff_cnps_received += cnps;
        f->ff_cnps_sent += cnps;
        f->npkts -= static_cast<uint32_t>(k);
        f->size -= k * cfg.payload;
        f->ff_packets += k;
        f->ff_bytes += k * cfg.payload;
        f->ff_last_jump_bytes = k * cfg.payload;
        for (uint32_t link : f->fwd)
        {
            ports[link]->ff_tx_bytes += k * data_wire;
            ports[link]->ff_tx_packets += k;
        }
        uint64_t acks = k / cfg.ack_interval;
        for (uint32_t link : f->rev)
        {
            ports[link]->ff_tx_bytes += acks * ack_wire + cnps * kCnpOverhead;
            ports[link]->ff_tx_packets += acks + cnps;
        }
    }
    if (cfg.monitor_interval > 0)
    {
        // The monitor's samples inside the skipped time: queues as they stand,
        // every jumped message's bytes delivered at its steady rate.
        for (int64_t t = cfg.monitor_interval; t < jump; t += cfg.monitor_interval)
        {
            SampleAt(clock + t, 1.0 - static_cast<double>(t) / static_cast<double>(jump));
        }
    }
    skipped += jump;
    ++ff_jumps;
    if (run_until_ >= 0)
    {
        until_event_.Cancel();
        until_event_ = ns3::Simulator::Stop(ns3::PicoSeconds(std::max<int64_t>(run_until_ - Clock(), 0)));
    }
}

} // namespace astra_ns3
