// The C interface the Python worker calls (ctypes on the compiled library, or
// cppyy on the same code compiled just in time). One fabric per process at a
// time, as ns-3 has one simulator per process.
#include "roce.h"

#include "ns3/rng-seed-manager.h"

#include <cstring>
#include <algorithm>

using astra_ns3::Config;
using astra_ns3::Fabric;

namespace
{
Config g_config;
Fabric* g_fabric = nullptr;
std::string g_error;
// Messages started, and completions the caller has taken, in this fabric (astra_ns3_progress).
int64_t g_started = 0;
int64_t g_taken = 0;

bool
SetKey(Config& c, const std::string& key, double v)
{
    auto ps = [](double us) { return static_cast<int64_t>(us * 1e6 + 0.5); };
    if (key == "cc") c.cc = static_cast<int>(v);
    else if (key == "payload") c.payload = static_cast<uint32_t>(v);
    else if (key == "buffer") c.buffer = static_cast<uint64_t>(v);
    else if (key == "pfc") c.pfc = v != 0;
    else if (key == "pfc_alpha") c.pfc_alpha = v;
    else if (key == "pfc_xoff") c.pfc_xoff = static_cast<uint64_t>(v);
    else if (key == "pfc_headroom") c.pfc_headroom = static_cast<uint64_t>(v);
    else if (key == "pfc_xon_delta") c.pfc_xon_delta = static_cast<uint64_t>(v);
    else if (key == "ecn") c.ecn = v != 0;
    else if (key == "ack_interval") c.ack_interval = static_cast<uint32_t>(v);
    else if (key == "rto_us") c.rto = ps(v);
    else if (key == "max_timeouts") c.max_timeouts = static_cast<uint32_t>(v);
    else if (key == "seed") c.seed = static_cast<uint64_t>(v);
    else if (key == "dcqcn_g") c.dcqcn_g = v;
    else if (key == "cnp_interval_us") c.cnp_interval = ps(v);
    else if (key == "alpha_timer_us") c.alpha_timer = ps(v);
    else if (key == "rate_timer_us") c.rate_timer = ps(v);
    else if (key == "byte_counter") c.byte_counter = static_cast<uint64_t>(v);
    else if (key == "fast_recovery") c.fast_recovery = static_cast<int>(v);
    else if (key == "rate_ai") c.rate_ai = v;
    else if (key == "rate_hai") c.rate_hai = v;
    else if (key == "min_rate") c.min_rate = v;
    else if (key == "clamp_target") c.clamp_target = v != 0;
    else if (key == "hpcc_eta") c.hpcc_eta = v;
    else if (key == "hpcc_max_stage") c.hpcc_max_stage = static_cast<int>(v);
    else if (key == "hpcc_rate_ai") c.hpcc_rate_ai = v;
    else if (key == "timely_alpha") c.timely_alpha = v;
    else if (key == "timely_beta") c.timely_beta = v;
    else if (key == "timely_t_low_us") c.timely_t_low = ps(v);
    else if (key == "timely_t_high_us") c.timely_t_high = ps(v);
    else if (key == "timely_min_rtt_us") c.timely_min_rtt = ps(v);
    else if (key == "timely_rate_ai") c.timely_rate_ai = v;
    else if (key == "timely_hai_after") c.timely_hai_after = static_cast<int>(v);
    else if (key == "timely_hai_factor") c.timely_hai_factor = v;
    else if (key == "dctcp_g") c.dctcp_g = v;
    else if (key == "pint_log_base") c.pint_log_base = v;
    else if (key == "pint_prob") c.pint_prob = v;
    else if (key == "monitor_interval_us") c.monitor_interval = ps(v);
    else if (key == "fast_forward") c.fast_forward = v != 0;
    else if (key == "ff_tolerance") c.ff_tolerance = v;
    else return false;
    return true;
}
} // namespace

extern "C"
{

int
astra_ns3_abi()
{
    return 1;
}

int
astra_ns3_set(const char* key, double value)
{
    return SetKey(g_config, key, value) ? 0 : -1;
}

int
astra_ns3_create()
{
    static bool resolution_set = false;
    if (!resolution_set)
    {
        // Picoseconds: a 4 KB frame at 400 Gb/s lasts 83.56 ns, which whole ns would round.
        ns3::Time::SetResolution(ns3::Time::PS);
        resolution_set = true;
    }
    if (g_fabric)
    {
        g_error = "a fabric already exists in this process";
        return -1;
    }
    ns3::RngSeedManager::SetSeed(static_cast<uint32_t>(g_config.seed % 4294967295u) + 1);
    ns3::RngSeedManager::SetRun(1);
    ns3::RngSeedManager::ResetNextStreamIndex();
    g_fabric = new Fabric(g_config);
    g_config = Config();
    g_started = 0;
    g_taken = 0;
    return 0;
}

const char*
astra_ns3_error()
{
    if (g_fabric && !g_fabric->error.empty())
    {
        return g_fabric->error.c_str();
    }
    return g_error.c_str();
}

int
astra_ns3_add_node(int is_switch)
{
    return g_fabric->AddNode(is_switch != 0);
}

int
astra_ns3_add_cable(uint32_t link_ab, uint32_t link_ba, uint32_t a, uint32_t b, double rate_ab,
                    double rate_ba, int64_t delay_ps, double kmin_ab, double kmax_ab,
                    double pmax_ab, double kmin_ba, double kmax_ba, double pmax_ba)
{
    return g_fabric->AddCable(link_ab, link_ba, a, b, rate_ab, rate_ba, delay_ps, kmin_ab,
                              kmax_ab, pmax_ab, kmin_ba, kmax_ba, pmax_ba);
}

int
astra_ns3_add_qp(uint32_t id, uint32_t src, uint32_t dst, const uint32_t* fwd, int nfwd,
                 const uint32_t* rev, int nrev)
{
    return g_fabric->AddQp(id, src, dst, fwd, nfwd, rev, nrev);
}

// Starts n messages now: rows[3k..3k+2] = (message id, queue pair, bytes).
int
astra_ns3_start_flows(const int64_t* rows, int n)
{
    for (int k = 0; k < n; ++k)
    {
        const int64_t* row = rows + 3 * k;
        if (row[0] < 0 || row[1] < 0 || row[2] < 0)
        {
            g_fabric->error = "message " + std::to_string(row[0]) + ": negative id, queue pair or size";
            return -1;
        }
        if (g_fabric->StartFlow(static_cast<uint32_t>(row[0]), static_cast<uint32_t>(row[1]),
                                static_cast<uint64_t>(row[2])) != 0)
        {
            return -1;
        }
        ++g_started;
    }
    // Room for every message not yet taken to complete: `completed` then never
    // reallocates inside Run(), so astra_ns3_progress may read its size from
    // another thread. Doubling keeps this amortized O(1) per message.
    std::vector<uint32_t>& done = g_fabric->completed;
    size_t pending = static_cast<size_t>(g_started - g_taken);
    if (done.capacity() < pending)
    {
        done.reserve(2 * pending);
    }
    return 0;
}

int
astra_ns3_run(int64_t until_ps)
{
    return g_fabric->Run(until_ps);
}

int64_t
astra_ns3_now()
{
    return ns3::Simulator::Now().GetPicoSeconds();
}

// For the worker's heartbeat, read from another thread while Run() executes (the
// reads are of single words the event loop writes): out[0] the simulated time
// (astra_ns3_now), out[1] the events ns-3 has executed, out[2] the messages
// started, out[3] the messages completed, in this fabric.
void
astra_ns3_progress(int64_t* out)
{
    out[0] = astra_ns3_now();
    out[1] = static_cast<int64_t>(ns3::Simulator::GetEventCount());
    out[2] = g_started;
    out[3] = g_taken + static_cast<int64_t>(g_fabric->completed.size());
}

// out[0..4]: ps fast-forwarded (summed over the parts of the fabric that
// jumped), fast-forwards made, packet-hops skipped, messages started on a port
// whose queue pairs were waiting out a jump, and the ps left of those waits.
void
astra_ns3_fast_forward(int64_t* out)
{
    out[0] = g_fabric->ff_skipped;
    out[1] = static_cast<int64_t>(g_fabric->ff_jumps);
    out[3] = static_cast<int64_t>(g_fabric->ff_conflicts);
    out[4] = g_fabric->ff_conflict_ps;
    out[2] = 0;
    for (const astra_ns3::Port* p : g_fabric->ports)
    {
        out[2] += p ? static_cast<int64_t>(p->ff_tx_packets) : 0;
    }
}

int
astra_ns3_take_completions(uint32_t* out, int capacity)
{
    int n = static_cast<int>(std::min<size_t>(g_fabric->completed.size(), capacity));
    std::memcpy(out, g_fabric->completed.data(), n * sizeof(uint32_t));
    g_fabric->completed.erase(g_fabric->completed.begin(), g_fabric->completed.begin() + n);
    g_taken += n;
    return n;
}

int
astra_ns3_pending_completions()
{
    return static_cast<int>(g_fabric->completed.size());
}

// sizes[0..5]: port slots, flows, queue samples, flow samples, misrouted packets, nodes
void
astra_ns3_sizes(int64_t* sizes)
{
    sizes[0] = static_cast<int64_t>(g_fabric->ports.size());
    sizes[1] = static_cast<int64_t>(g_fabric->flows.size());
    sizes[2] = static_cast<int64_t>(g_fabric->queue_samples.size());
    sizes[3] = static_cast<int64_t>(g_fabric->flow_samples.size());
    sizes[4] = static_cast<int64_t>(g_fabric->misrouted);
    sizes[5] = static_cast<int64_t>(g_fabric->nodes.size());
}

// Per port slot, 12 values: present, node, tx_bytes, tx_packets, drops, ecn_marks,
// pauses_sent, resumes_sent, pauses_received, max_queue_bytes, paused_ps, headroom.
void
astra_ns3_port_stats(int64_t* out)
{
    int64_t now = ns3::Simulator::Now().GetPicoSeconds();
    for (size_t k = 0; k < g_fabric->ports.size(); ++k)
    {
        int64_t* row = out + 12 * k;
        const astra_ns3::Port* p = g_fabric->ports[k];
        if (!p)
        {
            std::fill(row, row + 12, 0);
            continue;
        }
        row[0] = 1;
        row[1] = p->node;
        row[2] = static_cast<int64_t>(p->tx_bytes + p->ff_tx_bytes);
        row[3] = static_cast<int64_t>(p->tx_packets + p->ff_tx_packets);
        row[4] = static_cast<int64_t>(p->drops);
        row[5] = static_cast<int64_t>(p->marks);
        row[6] = static_cast<int64_t>(p->pauses_sent);
        row[7] = static_cast<int64_t>(p->resumes_sent);
        row[8] = static_cast<int64_t>(p->pauses_received);
        row[9] = static_cast<int64_t>(p->max_queue);
        row[10] = p->paused_ps + (p->paused ? now - p->paused_since : 0);
        row[11] = static_cast<int64_t>(p->headroom);
    }
}

// Per node: max buffer occupancy, bytes.
void
astra_ns3_node_stats(int64_t* out)
{
    for (size_t k = 0; k < g_fabric->nodes.size(); ++k)
    {
        out[k] = static_cast<int64_t>(g_fabric->nodes[k].max_buffer);
    }
}

// Per flow, 9 values: start_ps, finish_ps, packets_sent, retransmits, timeouts,
// cnps_sent, cnps_received, base_rtt_ps, the queue pair's rate at the end (bit/s).
void
astra_ns3_flow_stats(int64_t* out)
{
    size_t k = 0;
    for (const astra_ns3::Flow& f : g_fabric->flows)
    {
        int64_t* row = out + 9 * k++;
        row[0] = f.start;
        row[1] = f.finish;
        row[2] = static_cast<int64_t>(f.packets_sent + f.ff_packets);
        row[3] = static_cast<int64_t>(f.retransmits);
        row[4] = static_cast<int64_t>(f.timeouts);
        row[5] = static_cast<int64_t>(f.cnps_sent);
        row[6] = static_cast<int64_t>(f.cnps_received);
        row[7] = f.qp->base_rtt;
        row[8] = static_cast<int64_t>(f.qp->rate + 0.5);
    }
}

void
astra_ns3_queue_samples(int64_t* t, int64_t* port, int64_t* bytes)
{
    size_t k = 0;
    for (const astra_ns3::QueueSample& s : g_fabric->queue_samples)
    {
        t[k] = s.t;
        port[k] = s.port;
        bytes[k] = static_cast<int64_t>(s.bytes);
        ++k;
    }
}

void
astra_ns3_flow_samples(int64_t* t, int64_t* flow, int64_t* delivered, double* rate)
{
    size_t k = 0;
    for (const astra_ns3::FlowSample& s : g_fabric->flow_samples)
    {
        t[k] = s.t;
        flow[k] = s.flow;
        delivered[k] = static_cast<int64_t>(s.delivered);
        rate[k] = s.rate;
        ++k;
    }
}

void
astra_ns3_destroy()
{
    ns3::Simulator::Destroy();
    delete g_fabric;
    g_fabric = nullptr;
    g_error.clear();
}

void
astra_ns3_abort()
{
    // For tests of the process isolation: dies the way an ns-3 assertion does.
    NS_FATAL_ERROR("astra_ns3_abort called");
}

} // extern "C"
