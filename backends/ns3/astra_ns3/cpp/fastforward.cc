// Steady-state fast-forward: skip the packets of the parts of the fabric whose
// flows have converged, as Wormhole does (Long et al., NSDI 2026, arXiv
// 2602.10615: LLM traffic spends most of its packets in steady states of a few
// contention patterns; partition the network and jump each part's flows to
// their next change).
//
// Parts. The queue pairs with messages, joined where their routes (data or
// ACKs) share a port, directly or through others, form the fabric's parts;
// each part is measured and fast-forwarded on its own, so that the NVLink
// islands of an LLM job and its inter-node traffic do not wait for one another.
//
// A jump of dt ps removes, from the message each of a part's queue pairs is
// working on, the whole packets it would have sent in dt at its measured rate,
// and holds the queue pair back for exactly their time (Qp::Hold: its rate
// limiter's next send, and DCQCN's timers, which resume where they stood).
// ns-3's clock runs on: the packets already on their way arrive, and then the
// queue pairs go on where they would have been, so that everything after the
// jump happens when it would have. What the jump gets wrong is the part's
// queues, which drain while it waits (their bytes then arrive up to the
// queue's depth over the rate early; a jump is made only when that is under a
// tenth of the tolerance of dt), and the pipeline, empty when the part
// resumes. The skipped packets count as sent (Flow's ff_packets, the ports'
// ff_tx_bytes and ff_tx_packets with their ACKs), so traffic counters add up
// as if simulated.
//
// A jump runs past the caller's next event (Run's `until`): the system
// layer's timers rarely start messages where a part is waiting. When one
// does (a message whose data or ACKs cross a port of a waiting part), the
// part takes back the packets of the rest of its wait and sends them from
// then on (FfGiveBack), so that the newcomer meets the part's traffic; only
// the part's pipeline is empty for a round trip. Each is counted
// (ff_conflicts, and the wait taken back in ff_conflict_ps). A message on a
// waiting queue pair queues behind its messages, as it would.
//
// Steady. A part, after a change (a queue pair starts or stops sending, a
// pause, a drop, a retransmission: Fabric::Changed), settles for its longest
// base RTT, then is measured in windows:
//  * every queue pair sent at least kFfMinPackets packets in the window, and
//    its rate (packets between the first's and the last's wire start) is
//    within `ff_tolerance` of the previous window's; its receiver took them at
//    the same rate (no queue on its way grows or drains); it received no CNP;
//  * every port's time-averaged data queue is within `ff_tolerance` (plus an
//    eighth of a frame) of the previous window's; no port marked ECN or is
//    paused;
//  * a congestion control that may move on its own (HPCC, PINT, TIMELY,
//    DCTCP; DCQCN below line rate) is judged only over windows of at least
//    kFfCycleRtts base RTTs, so that its cycles average out; and no rate's
//    trend (its change since the first window) may move it by more than the
//    tolerance before the jump would end;
//  * no queue pair is in its tail (all sent, waiting for ACKs).
// The first window is long enough for every queue pair to send kFfMinPackets
// frames where it shares a port with the most others; it doubles after every
// unsteady check, up to kFfMaxWindows times. Where a state never holds
// (congestion signals, PFC, a CC that keeps moving, a queue pair paced too
// slowly to measure) the part keeps simulating packets.
//
// The jump. dt is the largest time in which no sending message of the part
// comes within MarginPackets() packets of its end: the end of a message and
// what follows is simulated packet by packet.
//
// Memo. A part found steady leaves its rates and queues under its signature
// (its queue pairs' routes); when the same pattern returns, its first window is
// compared with them rather than with a window of its own, and a quiet one
// (rate-based queue pairs at line rate) jumps at once. A queue pair that
// starts on a route of a quiet pattern, where no port ever marked ECN or
// paused, sends its first packets only after that instant's check, so that
// it can jump before they go: the pipeline's filling is then simulated after
// the jump instead of before it.
#include "roce.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>

namespace astra_ns3
{

namespace
{
constexpr uint64_t kFfMinPackets = 8;    // packets per queue pair per window to trust its rate
constexpr int64_t kFfMaxWindows = 64;    // the longest window, in first windows
constexpr size_t kFfMemoMax = 1 << 16;   // contention patterns remembered
constexpr double kFfCycleRtts = 32;      // the shortest window over which a moving CC is judged
constexpr int kSettling = 0, kMeasuring = 1;

// Whether no port on q's routes (data and ACKs) ever marked ECN or was paused.
bool
NeverCongested(const Qp& q)
{
    for (const std::vector<uint32_t>* links : {&q.route, &q.ack_route})
    {
        for (uint32_t link : *links)
        {
            const Port* port = q.fab->ports[link];
            if (port->marks > 0 || port->pauses_received > 0)
            {
                return false;
            }
        }
    }
    return true;
}

// Packets left to simulate at the end of a message: its last, and the one
// before it where the last is shorter than a full payload. At every hop of a
// store-and-forward route a short last packet waits for the full one ahead
// of it (without it, a lone 1,000,000 B message over two 100 Gb/s hops ends
// 281.6 ns early: a full frame's time less the last frame's); a full one
// arrives as that one leaves, and waits for nothing (where a later hop is
// slower, a queue builds up there, which the jump's drain check bounds).
uint64_t
MarginPackets(const Flow& f)
{
    return f.size % f.fab->cfg.payload == 0 ? 1 : 2;
}

int64_t
NowPs()
{
    return ns3::Simulator::Now().GetPicoSeconds();
}

// Packets per ps of a window's `count` packets between the first's and the
// last's times; -1 when too few to trust.
double
WindowRate(uint64_t count, int64_t first, int64_t last)
{
    if (count < kFfMinPackets || last <= first)
    {
        return -1;
    }
    return static_cast<double>(count - 1) / static_cast<double>(last - first);
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

size_t
Root(std::vector<size_t>& parent, size_t k)
{
    while (parent[k] != k)
    {
        parent[k] = parent[parent[k]];
        k = parent[k];
    }
    return k;
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
Fabric::FfStart(Flow* f)
{
    if (cfg.fast_forward)
    {
        // A message on a port of a part that waits out a jump: the part takes
        // back the packets of the rest of its wait and sends them from now on.
        for (const std::vector<uint32_t>* links : {&f->qp->route, &f->qp->ack_route})
        {
            for (uint32_t link : *links)
            {
                uint64_t hold = ports[link]->ff_hold;
                if (hold != 0 && f->qp->ff_hold != hold)
                {
                    FfGiveBack(hold);
                }
            }
        }
    }
    Qp* q = f->qp;
    bool joins = !q->in_port || q->to_send.empty();
    // A queue pair that starts sending changes the pattern (one more message
    // behind those it is sending does not). Where its route is in a quiet
    // pattern seen before and none of its ports ever marked ECN or paused,
    // its first packets wait for this instant's check, which may jump it
    // before they go. (Where ports mark, DCQCN makes the run chaotic: the
    // order of one instant's events alone moved a congested all-to-all's
    // step by 3.5 %.)
    q->ff_deferred = joins && cfg.fast_forward && ff_quiet_routes_.count(q->route_hash) > 0 && NeverCongested(*q);
    f->Start();
    if (joins)
    {
        Changed(q);
    }
    if (q->ff_deferred)
    {
        ff_deferred_.push_back(q);
    }
}

void
Fabric::FfSkip(Flow* f, int64_t packets, int64_t acks)
{
    // `packets` of f's data packets (< 0: taken back) leave the message to be
    // counted as sent, with `acks` ACKs, on every port of their routes.
    f->npkts = static_cast<uint32_t>(static_cast<int64_t>(f->npkts) - packets);
    f->size = static_cast<uint64_t>(static_cast<int64_t>(f->size) - packets * cfg.payload);
    f->ff_packets = static_cast<uint64_t>(static_cast<int64_t>(f->ff_packets) + packets);
    for (uint32_t link : f->qp->route)
    {
        ports[link]->ff_tx_bytes += static_cast<uint64_t>(packets * DataWire());
        ports[link]->ff_tx_packets += static_cast<uint64_t>(packets);
    }
    for (uint32_t link : f->qp->ack_route)
    {
        ports[link]->ff_tx_bytes += static_cast<uint64_t>(acks * AckWire());
        ports[link]->ff_tx_packets += static_cast<uint64_t>(acks);
    }
}

void
Fabric::FfGiveBack(uint64_t hold)
{
    auto found = ff_holds_.find(hold);
    if (found == ff_holds_.end())
    {
        return;
    }
    FfHold h = std::move(found->second);
    ff_holds_.erase(found);
    int64_t now = NowPs();
    if (h.end <= now)
    {
        return;
    }
    ++ff_conflicts;
    ff_conflict_ps += h.end - now;
    ff_skipped -= h.end - now;
    for (Qp* q : h.qps)
    {
        if (q->ff_hold != hold || q->ff_hold_end <= now)
        {
            continue;
        }
        q->ff_hold = 0;
        Flow* f = q->ff_hold_flow;
        double left = static_cast<double>(q->ff_hold_end - now) * q->ff_hold_rate;
        uint64_t back = std::min<uint64_t>(q->ff_hold_skip, static_cast<uint64_t>(left));
        if (back > 0)
        {
            uint64_t acks = q->ff_hold_skip / cfg.ack_interval - (q->ff_hold_skip - back) / cfg.ack_interval;
            FfSkip(f, -static_cast<int64_t>(back), -static_cast<int64_t>(acks));
            q->ff_hold_skip -= back;
            q->Shift(-static_cast<int64_t>(static_cast<double>(back) / q->ff_hold_rate + 0.5));
        }
        Changed(q);
        q->port->Pump();
    }
}

void
Fabric::Changed(Qp* q)
{
    if (!cfg.fast_forward)
    {
        return;
    }
    q->ff_dirty = true;
    for (const std::vector<uint32_t>* links : {&q->route, &q->ack_route}) // the part it leaves
    {
        for (uint32_t link : *links)
        {
            ports[link]->ff_dirty = true;
        }
    }
    FfSchedule(0); // look at the part at this instant, after the events due now
}

void
Fabric::Changed(Port* p)
{
    if (!cfg.fast_forward)
    {
        return;
    }
    p->ff_dirty = true;
    FfSchedule(0);
}

void
Fabric::FfSchedule(int64_t delay)
{
    int64_t due = NowPs() + delay;
    if (ff_event_.IsPending() && ff_event_due_ <= due)
    {
        return;
    }
    ff_event_.Cancel();
    ff_event_due_ = due;
    ff_event_ = ns3::Simulator::Schedule(ns3::PicoSeconds(delay), &Fabric::FfCheck, this);
}

void
Fabric::FfCheck()
{
    FfCheckParts();
    // The queue pairs that started at this instant send now, unless a jump holds them.
    std::vector<Qp*> deferred;
    deferred.swap(ff_deferred_);
    for (Qp* q : deferred)
    {
        if (q->ff_deferred)
        {
            q->ff_deferred = false;
            q->port->Pump();
        }
    }
}

void
Fabric::FfCheckParts()
{
    int64_t now = NowPs();
    ff_event_due_ = -1;
    // The queue pairs with messages, by id.
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
    for (auto hold = ff_holds_.begin(); hold != ff_holds_.end();)
    {
        hold = hold->second.end <= now ? ff_holds_.erase(hold) : std::next(hold);
    }
    if (ff_qps_.empty())
    {
        return; // idle: the next message restarts the checks
    }
    std::sort(ff_qps_.begin(), ff_qps_.end(), [](const Qp* a, const Qp* b) { return a->id < b->id; });
    // Parts: queue pairs joined by the ports their routes share.
    ++ff_stamp_;
    size_t n = ff_qps_.size();
    ff_parent_.resize(n);
    for (size_t k = 0; k < n; ++k)
    {
        ff_parent_[k] = k;
    }
    // A queue pair's ACKs join it to the queue pairs whose data shares their
    // ports: waiting out a jump stops its ACKs too.
    for (size_t k = 0; k < n; ++k)
    {
        for (const std::vector<uint32_t>* links : {&ff_qps_[k]->route, &ff_qps_[k]->ack_route})
        {
            int64_t data = links == &ff_qps_[k]->route ? 1 : 0;
            for (uint32_t link : *links)
            {
                Port* port = ports[link];
                if (port->ff_stamp != ff_stamp_)
                {
                    port->ff_stamp = ff_stamp_;
                    port->ff_owner = k;
                    port->ff_sharing = data;
                    continue;
                }
                port->ff_sharing += data;
                size_t a = Root(ff_parent_, k), b = Root(ff_parent_, port->ff_owner);
                if (a != b)
                {
                    ff_parent_[std::max(a, b)] = std::min(a, b);
                }
            }
        }
    }
    // Order by part (its root), then by id: each part is a run of ff_qps_.
    std::vector<size_t> order(n);
    for (size_t k = 0; k < n; ++k)
    {
        order[k] = k;
    }
    std::vector<size_t> root(n);
    for (size_t k = 0; k < n; ++k)
    {
        root[k] = Root(ff_parent_, k);
    }
    std::stable_sort(order.begin(), order.end(), [&root](size_t a, size_t b) { return root[a] < root[b]; });
    std::vector<Qp*> sorted(n);
    for (size_t k = 0; k < n; ++k)
    {
        sorted[k] = ff_qps_[order[k]];
    }
    ff_qps_.swap(sorted);
    int64_t next = std::numeric_limits<int64_t>::max();
    ++ff_stamp_;
    for (size_t begin = 0; begin < n;)
    {
        size_t end = begin + 1;
        while (end < n && root[order[end]] == root[order[begin]])
        {
            ++end;
        }
        // Within a part, by route: the pattern is the routes that contend, not
        // which queue pairs (streams) happen to use them.
        std::stable_sort(ff_qps_.begin() + static_cast<std::ptrdiff_t>(begin),
                         ff_qps_.begin() + static_cast<std::ptrdiff_t>(end),
                         [](const Qp* a, const Qp* b) { return a->route < b->route; });
        FfPart part{&ff_qps_[begin], end - begin, {}, 1469598103934665603ull};
        bool dirty = false;
        for (size_t k = 0; k < part.nqps; ++k)
        {
            Qp* q = part.qps[k];
            part.signature = (part.signature ^ q->route_hash) * 1099511628211ull;
            dirty = dirty || q->ff_dirty;
            for (const std::vector<uint32_t>* links : {&q->route, &q->ack_route})
            {
                for (uint32_t link : *links)
                {
                    Port* port = ports[link];
                    if (port->ff_stamp != ff_stamp_)
                    {
                        port->ff_stamp = ff_stamp_;
                        part.ports.push_back(port);
                        dirty = dirty || port->ff_dirty;
                    }
                }
            }
        }
        Qp* lead = part.qps[0];
        if (dirty)
        {
            FfRestart(part);
        }
        else if (now >= lead->ff_due)
        {
            if (lead->ff_phase == kSettling)
            {
                FfStartWindows(part);
            }
            else if (FfSteady(part))
            {
                FfRemember(part);
                if (!FfJump(part, lead->ff_window))
                {
                    for (size_t k = 0; k < part.nqps; ++k)
                    {
                        part.qps[k]->ff_due = now + lead->ff_window;
                    }
                }
            }
            else
            {
                int64_t window = std::min(lead->ff_window * 2, lead->ff_window_cap);
                for (size_t k = 0; k < part.nqps; ++k)
                {
                    part.qps[k]->ff_window = window;
                    part.qps[k]->ff_due = now + window;
                }
            }
        }
        next = std::min(next, std::max(lead->ff_due, now + 1));
        begin = end;
    }
    FfSchedule(next - now);
}

void
Fabric::FfRestart(FfPart& part)
{
    // After a change: forget the part's windows, settle for its longest base
    // RTT. A quiet pattern seen before jumps at once; any pattern seen before
    // is measured at once (its rates stand for the previous window, and rates
    // are timed from first to last packet, which the pipeline's filling does
    // not bend).
    int64_t now = NowPs();
    int64_t settle = 0;
    for (size_t k = 0; k < part.nqps; ++k)
    {
        Qp* q = part.qps[k];
        q->ff_dirty = false;
        settle = std::max(settle, q->base_rtt);
    }
    for (Port* port : part.ports)
    {
        port->ff_dirty = false;
    }
    for (size_t k = 0; k < part.nqps; ++k)
    {
        Qp* q = part.qps[k];
        q->ff_phase = kSettling;
        q->ff_due = now + settle;
    }
    if (!FfQuickJump(part) && ff_memo_.count(part.signature))
    {
        FfStartWindows(part);
    }
}

void
Fabric::FfStartWindows(FfPart& part)
{
    // The first window lasts long enough for every queue pair to send
    // kFfMinPackets frames where it shares a port with the most others. A
    // pattern seen steady before lends its rates and queues as the previous
    // window.
    int64_t now = NowPs();
    int64_t frame = DataWire();
    int64_t window = 1000;
    int64_t rtt = 0;
    for (size_t k = 0; k < part.nqps; ++k)
    {
        rtt = std::max(rtt, part.qps[k]->base_rtt);
    }
    for (Port* port : part.ports)
    {
        window = std::max(window, static_cast<int64_t>(kFfMinPackets + 1) * port->ff_sharing * port->TxTime(frame));
        port->AccountQueue();
        port->q_area_start = port->q_area;
        port->q_prev_mean = -1;
        port->marks_start = port->marks;
    }
    auto seen = ff_memo_.find(part.signature);
    bool hit = seen != ff_memo_.end() && seen->second.rates.size() == part.nqps &&
               seen->second.queue_means.size() == part.ports.size();
    for (size_t k = 0; k < part.nqps; ++k)
    {
        Qp* q = part.qps[k];
        q->ff_count = 0;
        q->ff_rx_count = 0;
        q->ff_prev_rate = hit ? seen->second.rates[k] : -1;
        q->ff_drift = 0;
        q->ff_base_rate = -1;
        q->ff_cnps_start = q->cnps_received;
        q->ff_phase = kMeasuring;
        q->ff_memo_hit = hit;
        q->ff_window = window;
        // (A congestion control that may move is judged over kFfCycleRtts base RTTs:
        // the windows may grow that long.)
        q->ff_window_cap = std::max(window * kFfMaxWindows, static_cast<int64_t>(2 * kFfCycleRtts) * rtt);
        q->ff_window_start = now;
        q->ff_prev_length = 0;
        q->ff_due = now + window;
    }
    if (hit)
    {
        for (size_t k = 0; k < part.ports.size(); ++k)
        {
            part.ports[k]->q_prev_mean = seen->second.queue_means[k];
        }
    }
}

bool
Fabric::FfQuickJump(FfPart& part)
{
    // A quiet pattern seen before: its rates hold from the messages' first
    // packets, so jump now rather than after a window.
    auto seen = ff_memo_.find(part.signature);
    if (seen == ff_memo_.end() || !seen->second.quiet || seen->second.rates.size() != part.nqps)
    {
        return false;
    }
    for (Port* port : part.ports)
    {
        if (port->paused)
        {
            return false;
        }
    }
    for (size_t k = 0; k < part.nqps; ++k)
    {
        Qp* q = part.qps[k];
        q->ff_cc_min = q->ff_cc_max = q->rate;
        if (q->to_send.empty() || CcMayMove(*q))
        {
            return false;
        }
    }
    for (size_t k = 0; k < part.nqps; ++k)
    {
        Qp* q = part.qps[k];
        q->ff_prev_rate = seen->second.rates[k];
        q->ff_drift = 0;
    }
    return FfJump(part, 1000); // jumps shorter than 1 ns are not worth it
}

bool
Fabric::FfSteady(FfPart& part)
{
    // Compares this window with the previous one and starts the next window.
    int64_t now = NowPs();
    Qp* lead = part.qps[0];
    double length = static_cast<double>(std::max<int64_t>(now - lead->ff_window_start, 1));
    double before = static_cast<double>(lead->ff_prev_length);
    double tol = cfg.ff_tolerance;
    double slack = DataWire() / 8.0;
    bool steady = true;
    for (Port* port : part.ports)
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
        steady = steady && port->marks_window == 0; // quiet: no congestion signal
    }
    for (size_t k = 0; k < part.nqps; ++k)
    {
        Qp* q = part.qps[k];
        if (q->to_send.empty())
        {
            steady = false; // its last packets are out: a message is about to end
        }
        double rate = WindowRate(q->ff_count, q->ff_first, q->ff_last);
        double rx_rate = WindowRate(q->ff_rx_count, q->ff_rx_first, q->ff_rx_last);
        // (Against the memo's rates, measured where the receivers took them at
        // the same rate, the senders' rates suffice: a first window need not
        // outlast the path's latency.)
        bool received = q->ff_memo_hit || (rx_rate > 0 && std::fabs(rx_rate - rate) <= tol * std::max(rate, rx_rate));
        bool ok = rate > 0 && q->ff_prev_rate > 0 &&
                  std::fabs(rate - q->ff_prev_rate) <= tol * std::max(rate, q->ff_prev_rate) && received &&
                  !(CcMayMove(*q) && length < kFfCycleRtts * static_cast<double>(q->base_rtt));
        int64_t middle = now - static_cast<int64_t>(length / 2);
        if (rate > 0 && (q->ff_base_rate < 0 || !ok))
        {
            // The first window of a run of steady ones (a transient before it
            // is not a trend).
            q->ff_base_rate = rate;
            q->ff_base_time = middle;
            q->ff_drift = 0;
        }
        else if (rate > 0 && middle > q->ff_base_time)
        {
            // The trend: the change since that window, per ps (noise between
            // windows does not add up; a drift does).
            q->ff_drift = std::fabs(rate - q->ff_base_rate) / std::max(rate, q->ff_base_rate) /
                          static_cast<double>(middle - q->ff_base_time);
        }
        if (ok && before > 0 && !q->ff_memo_hit)
        {
            // The jump's rate: the mean over both windows.
            rate = (rate * length + q->ff_prev_rate * before) / (length + before);
        }
        else if (ok && q->ff_memo_hit)
        {
            rate = q->ff_prev_rate; // the memo's, measured over a longer steady time
        }
        steady = steady && ok && q->cnps_received == q->ff_cnps_start;
        q->ff_prev_rate = rate;
        q->ff_count = 0;
        q->ff_rx_count = 0;
        q->ff_cnps_start = q->cnps_received;
        q->ff_window_start = now;
        q->ff_prev_length = static_cast<int64_t>(length);
    }
    for (size_t k = 0; k < part.nqps; ++k)
    {
        part.qps[k]->ff_memo_hit = false;
    }
    return steady;
}

void
Fabric::FfRemember(FfPart& part)
{
    if (ff_memo_.size() >= kFfMemoMax)
    {
        ff_memo_.clear();
        ff_quiet_routes_.clear();
    }
    FfPattern& pattern = ff_memo_[part.signature];
    pattern.rates.clear();
    pattern.queue_means.clear();
    pattern.quiet = true;
    for (Port* port : part.ports)
    {
        pattern.queue_means.push_back(port->q_prev_mean);
    }
    for (size_t k = 0; k < part.nqps; ++k)
    {
        Qp* q = part.qps[k];
        pattern.rates.push_back(q->ff_prev_rate);
        pattern.quiet = pattern.quiet && !CcMayMove(*q); // (steady parts have no mark or CNP)
    }
    for (size_t k = 0; pattern.quiet && k < part.nqps; ++k)
    {
        ff_quiet_routes_.insert(part.qps[k]->route_hash);
    }
}

bool
Fabric::FfJump(FfPart& part, int64_t window)
{
    // Every queue pair's ff_prev_rate is its rate (packets per ps); jumps
    // shorter than `window` ps are not made. The queue pair whose message is
    // nearest its end bounds the jump.
    double dt = std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < part.nqps; ++k)
    {
        Qp* q = part.qps[k];
        Flow* f = q->to_send.front();
        double unsent = static_cast<double>(f->npkts - f->snd_nxt);
        dt = std::min(dt, std::floor(unsent - static_cast<double>(MarginPackets(*f))) / q->ff_prev_rate);
    }
    if (!(dt >= static_cast<double>(window)) || !std::isfinite(dt))
    {
        return false; // too short to be worth it
    }
    for (Port* port : part.ports)
    {
        // Its queue drains while the part waits: what is queued then arrives
        // up to its depth over the rate early, which must be small beside dt
        // (a tenth of the tolerance: the jumps of a message add up).
        if (port->q_prev_mean > 0 &&
            port->TxTime(static_cast<uint64_t>(port->q_prev_mean)) > 0.1 * cfg.ff_tolerance * dt)
        {
            return false;
        }
    }
    for (size_t k = 0; k < part.nqps; ++k)
    {
        if (part.qps[k]->ff_drift * dt > cfg.ff_tolerance)
        {
            // A rate that drifts (within the tolerance per window) would move
            // past it before the jump ends: its congestion control is still
            // converging, and a jump would hold it back.
            return false;
        }
    }
    int64_t now = NowPs();
    int64_t jump = static_cast<int64_t>(dt);
    uint64_t id = ff_jumps + 1;
    FfHold& hold = ff_holds_[id];
    hold.end = now;
    for (size_t k = 0; k < part.nqps; ++k)
    {
        Qp* q = part.qps[k];
        Flow* f = q->to_send.front();
        // Whole packets: the queue pair waits exactly as long as they take.
        // (Rounded, not truncated: dt of the bounding queue pair is a whole
        // number of its packets, which truncation after the division would
        // lose one of. The wait below is the skipped packets' own time.)
        uint64_t skip = static_cast<uint64_t>(std::llround(q->ff_prev_rate * static_cast<double>(jump)));
        skip = std::min<uint64_t>(skip, f->npkts - f->snd_nxt - MarginPackets(*f));
        int64_t wait = static_cast<int64_t>(static_cast<double>(skip) / q->ff_prev_rate + 0.5);
        FfSkip(f, static_cast<int64_t>(skip), static_cast<int64_t>(skip / cfg.ack_interval));
        q->Hold(wait);
        q->ff_due = now + wait + q->base_rtt; // measured again once it is back in full flow
        q->ff_phase = kSettling;
        q->ff_hold = id;
        q->ff_hold_flow = f;
        q->ff_hold_skip = skip;
        q->ff_hold_rate = q->ff_prev_rate;
        q->ff_hold_end = now + wait;
        hold.qps.push_back(q);
        hold.end = std::max(hold.end, now + wait);
    }
    for (Port* port : part.ports)
    {
        port->ff_hold = id;
    }
    for (size_t k = 0; k < part.nqps; ++k)
    {
        part.qps[k]->port->Pump(); // wakes when the wait ends
    }
    ff_skipped += jump;
    ++ff_jumps;
    return true;
}

} // namespace astra_ns3
