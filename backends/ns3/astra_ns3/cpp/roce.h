// RoCEv2 on ns-3 point-to-point links: the declarations of astra's ns-3 backend.
//
// Stock ns-3 (3.44) has no RoCE, DCQCN, HPCC or PFC. This library adds them on
// top of ns-3's event scheduler, packets and PointToPointNetDevice/Channel,
// without ns-3's IP stack (no per-packet IP routing or traffic-control layer):
//
//   * RoceHeader: RoCEv2 packets (data, ACK, NACK, CNP) and PFC frames; the
//     header's serialized size makes every frame as long as on Ethernet.
//   * IntTag: HPCC's in-band telemetry, one record per hop (SIGCOMM'19 §3).
//   * Port: one egress port (a device on one end of a cable). Its queue
//     discipline: strict priority for control frames, round robin between
//     transit data and local queue pairs, ECN marking on the instantaneous
//     egress queue (RED-style Kmin/Kmax/Pmax as DCQCN deploys it), INT
//     stamping, and a PFC pause gate for data.
//   * Node: shared buffer, PFC XOFF/XON per ingress port with headroom.
//   * Qp: an RDMA RC queue pair: its messages in order, its rate limiter and
//     congestion control (DCQCN reaction point, HPCC window, or line rate).
//   * Flow: one message on a queue pair: go-back-N sender and the receiver
//     (ACK/NACK, DCQCN notification point).
//   * Fabric: the network; routes are given per flow (per-flow ECMP decided by
//     the caller), completions are collected for the caller in batches.
//
// Units: time in picoseconds (the library sets ns-3's resolution to ps),
// sizes in bytes, rates in bit/s.
#ifndef ASTRA_NS3_ROCE_H
#define ASTRA_NS3_ROCE_H

#include "ns3/data-rate.h"
#include "ns3/header.h"
#include "ns3/node.h"
#include "ns3/nstime.h"
#include "ns3/packet.h"
#include "ns3/point-to-point-channel.h"
#include "ns3/point-to-point-net-device.h"
#include "ns3/simulator.h"
#include "ns3/tag.h"

#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace astra_ns3
{

enum PacketKind : uint8_t
{
    kData = 0,
    kAck = 1,
    kNack = 2,
    kCnp = 3,
    kPfc = 4,
};

enum CcMode : int
{
    kCcNone = 0,
    kCcDcqcn = 1,     // upstream CC_MODE 1
    kCcHpcc = 3,      // upstream CC_MODE 3
    kCcTimely = 7,    // upstream CC_MODE 7
    kCcDctcp = 8,     // upstream CC_MODE 8
    kCcHpccPint = 10, // upstream CC_MODE 10
};

// Header flags.
constexpr uint8_t kFlagCe = 1;    // ECN Congestion Experienced (IP ECN = 11)
constexpr uint8_t kFlagPause = 2; // PFC frame: XOFF (set) or XON (clear)

// Frame sizes on the wire, bytes. Ethernet: MAC header 14, FCS 4, preamble and
// SFD 8, inter-frame gap 12. RoCEv2: IPv4 20, UDP 8, BTH 12, ICRC 4 (IBTA
// RoCEv2 annex). The point-to-point device adds its own 2-byte PPP header,
// which the RoceHeader's size leaves out so that frames are exactly as long.
constexpr uint32_t kPppBytes = 2;
constexpr uint32_t kEthernetBytes = 14 + 4 + 8 + 12;
constexpr uint32_t kRoceBytes = 20 + 8 + 12 + 4;
constexpr uint32_t kDataOverhead = kEthernetBytes + kRoceBytes;     // 82
constexpr uint32_t kAckOverhead = kDataOverhead + 4;                // + AETH
constexpr uint32_t kCnpOverhead = kDataOverhead + 16;               // + 16 reserved bytes
constexpr uint32_t kPfcFrameBytes = 64 + 8 + 12;                    // minimum frame + preamble/IFG
// HPCC's INT header: 2 bytes plus 8 bytes per hop for up to 5 hops (HPCC §4.4).
constexpr uint32_t kIntBytes = 42;
constexpr int kMaxIntHops = 8;
// HPCC-PINT's digest: a utilization U is sent as u = max(1, ceil(U * 512)) in
// powers of the log base (Ben Basat et al., SIGCOMM'20 §4; artifact pint.cc).
constexpr double kPintScale = 512;

struct Config
{
    int cc = kCcDcqcn;
    uint32_t payload = 4096;        // bytes of payload per data packet (RoCE path MTU)
    uint64_t buffer = 32ull << 20;  // shared buffer per node, bytes
    bool pfc = true;
    double pfc_alpha = 0.125;       // dynamic XOFF threshold = alpha * free shared buffer
    uint64_t pfc_xoff = 0;          // static XOFF threshold per ingress port (0: dynamic)
    uint64_t pfc_headroom = 0;      // headroom per ingress port (0: from the cable)
    uint64_t pfc_xon_delta = 0;     // XON when this far below XOFF (0: two data frames)
    bool ecn = true;
    uint32_t ack_interval = 1;      // ACK every n in-order data packets
    int64_t rto = 1000000000;       // retransmission timeout, ps
    uint32_t max_timeouts = 64;     // consecutive timeouts before a flow is declared stuck
    uint64_t seed = 1;
    // DCQCN (Zhu et al., SIGCOMM'15)
    double dcqcn_g = 1.0 / 256;
    int64_t cnp_interval = 4000000;       // ps
    int64_t alpha_timer = 55000000;       // ps
    int64_t rate_timer = 55000000;        // ps
    uint64_t byte_counter = 10000000;     // bytes
    int fast_recovery = 5;
    double rate_ai = 40e6;                // bit/s
    double rate_hai = 50e6;               // bit/s
    double min_rate = 100e6;              // bit/s
    bool clamp_target = false;
    // HPCC (Li et al., SIGCOMM'19)
    double hpcc_eta = 0.95;
    int hpcc_max_stage = 0;
    double hpcc_rate_ai = 50e6;           // bit/s; W_AI = rate_ai * base RTT
    // TIMELY (Mittal et al., SIGCOMM'15)
    double timely_alpha = 0.875;          // EWMA weight of a new RTT difference
    double timely_beta = 0.8;             // multiplicative decrease factor
    int64_t timely_t_low = 50000000;      // ps
    int64_t timely_t_high = 500000000;    // ps
    int64_t timely_min_rtt = 20000000;    // ps, normalizes the gradient
    double timely_rate_ai = 10e6;         // bit/s per 10 Gb/s of line rate (delta)
    int timely_hai_after = 5;             // increases in a row before hyper increase
    double timely_hai_factor = 5;         // hyper increase = factor * delta
    // DCTCP (Alizadeh et al., SIGCOMM'10) over RoCE
    double dctcp_g = 1.0 / 16;
    // HPCC-PINT (Ben Basat et al., SIGCOMM'20)
    double pint_log_base = 1.05;
    double pint_prob = 1.0;               // fraction of ACKs whose digest the sender uses

    // Extra header bytes of data packets and their ACKs: HPCC's INT, PINT's digest.
    uint32_t DataExtra() const;
    // PINT: the power (digest) of utilization u, rounded up or down at random
    // so that it is unbiased (artifact pint.cc), and its value back.
    int PintEncode(double u, double uniform) const;
    double PintDecode(int power) const;
    // Monitors
    int64_t monitor_interval = 0;         // ps; 0 = off
    // Steady-state fast-forward (fastforward.cc)
    bool fast_forward = true;
    double ff_tolerance = 0.01;           // relative change of a rate or queue between windows
};

class RoceHeader : public ns3::Header
{
  public:
    static ns3::TypeId GetTypeId();
    ns3::TypeId GetInstanceTypeId() const override;
    uint32_t GetSerializedSize() const override;
    void Serialize(ns3::Buffer::Iterator start) const override;
    uint32_t Deserialize(ns3::Buffer::Iterator start) override;
    void Print(std::ostream& os) const override;

    uint8_t kind = kData;
    uint8_t flags = 0;
    uint16_t size = kDataOverhead - kPppBytes; // serialized size, bytes
    uint32_t src = 0;  // source node
    uint32_t dst = 0;  // destination node
    uint32_t flow = 0; // queue pair (message) id
    uint32_t psn = 0;  // packet sequence number (data) or expected PSN (ACK/NACK)
};

struct IntHop
{
    int64_t ts;        // ps, when the packet left the egress queue
    uint64_t tx_bytes; // bytes the port had sent until then
    uint64_t qlen;     // bytes in the port's data queue then
    double rate;       // port rate, bit/s
};

class IntTag : public ns3::Tag
{
  public:
    static ns3::TypeId GetTypeId();
    ns3::TypeId GetInstanceTypeId() const override;
    uint32_t GetSerializedSize() const override;
    void Serialize(ns3::TagBuffer i) const override;
    void Deserialize(ns3::TagBuffer i) override;
    void Print(std::ostream& os) const override;

    uint8_t n = 0;
    IntHop hops[kMaxIntHops];
};

// The sender's timestamp on a data packet, echoed in its ACK (TIMELY's RTT).
class TimestampTag : public ns3::Tag
{
  public:
    static ns3::TypeId GetTypeId();
    ns3::TypeId GetInstanceTypeId() const override;
    uint32_t GetSerializedSize() const override;
    void Serialize(ns3::TagBuffer i) const override;
    void Deserialize(ns3::TagBuffer i) override;
    void Print(std::ostream& os) const override;

    int64_t ts = 0; // ps
};

// HPCC-PINT's digest: the largest encoded utilization on the path so far.
class PintTag : public ns3::Tag
{
  public:
    static ns3::TypeId GetTypeId();
    ns3::TypeId GetInstanceTypeId() const override;
    uint32_t GetSerializedSize() const override;
    void Serialize(ns3::TagBuffer i) const override;
    void Deserialize(ns3::TagBuffer i) override;
    void Print(std::ostream& os) const override;

    int16_t power = -1; // -1: no hop wrote yet
};

class Fabric;
struct Flow;
struct Qp;

struct Transit
{
    ns3::Ptr<ns3::Packet> packet;
    uint32_t size;   // bytes without the PPP header
    uint16_t ingress; // port index at this node it arrived on
};

// One egress port: a device at one end of a cable, with its queues.
class Port
{
  public:
    Fabric* fab = nullptr;
    uint32_t id = 0;      // = the directed link id of the caller's topology
    uint32_t node = 0;
    uint16_t index = 0;   // position among the node's ports
    ns3::Ptr<ns3::PointToPointNetDevice> dev;
    double rate = 0;      // bit/s
    int64_t delay = 0;    // ps, propagation to the peer
    double kmin = 0, kmax = 0, pmax = 0; // ECN marking (bytes, bytes, probability)
    uint64_t headroom = 0; // PFC headroom for traffic arriving on this port, bytes

    std::deque<ns3::Ptr<ns3::Packet>> ctrl; // ACK/NACK/CNP/PFC, strict priority, never paused
    std::deque<Transit> data;               // data packets in transit through this node
    uint64_t data_bytes = 0;
    std::vector<Qp*> qps;                   // local queue pairs sending on this port
    size_t rr = 0;

    bool paused = false;   // the peer sent XOFF
    int in_device = 0;     // packets handed to the device, not yet fully sent
    int64_t busy_until = 0; // ps, end of the transmission in progress
    ns3::EventId wake;

    // Ingress accounting for data that arrived on this port and is still buffered here.
    uint64_t ingress_bytes = 0;
    bool xoff = false;

    // Counters.
    uint64_t tx_bytes = 0, tx_packets = 0, drops = 0, marks = 0;
    uint64_t pauses_sent = 0, resumes_sent = 0, pauses_received = 0, max_queue = 0;
    int64_t paused_since = 0, paused_ps = 0;
    bool sampled_nonzero = false;

    // Fast-forward: the time integral of data_bytes (byte x ps) up to q_last (ps, ns-3
    // time), the window's starting integral and the previous window's mean queue
    // (bytes, -1: none), and the data and ACK traffic skipped over this port.
    double q_area = 0, q_area_start = 0, q_prev_mean = -1;
    int64_t q_last = 0;
    uint64_t ff_tx_bytes = 0, ff_tx_packets = 0;
    uint64_t marks_start = 0, marks_window = 0; // ECN marks: at the window's start, in the last window
    uint64_t ff_stamp = 0;             // the check that last listed this port
    int64_t ff_sharing = 0;            // sending queue pairs whose route crosses this port
    size_t ff_owner = 0;               // the first of them (an index into the check's list)
    bool ff_dirty = false;             // a pause, resume or drop since the last check
    uint64_t ff_hold = 0;              // the jump whose queue pairs wait on this port's part (0: none)
    void AccountQueue(); // before data_bytes changes

    // HPCC-PINT: this port's utilization estimate, updated per data packet.
    double pint_u = 0;
    int64_t pint_last_ts = -1;
    uint32_t pint_last_bytes = 0;

    int64_t TxTime(uint64_t bytes) const; // ps to serialize bytes
    void Pump();
    void SendControl(ns3::Ptr<ns3::Packet> p);
    void EnqueueTransit(ns3::Ptr<ns3::Packet> p, uint32_t size, uint16_t ingress);
    void SetPaused(bool pause);
    void RemoveQp(Qp* q);
    void OnTxBegin(ns3::Ptr<const ns3::Packet> p);
    void OnTxEnd(ns3::Ptr<const ns3::Packet> p);
    bool OnReceive(ns3::Ptr<ns3::NetDevice> dev,
                   ns3::Ptr<const ns3::Packet> p,
                   uint16_t protocol,
                   const ns3::Address& from);

  private:
    ns3::Ptr<ns3::Packet> Next();
    ns3::Ptr<ns3::Packet> DequeueTransit();
    void StampPint(ns3::Ptr<ns3::Packet> p, uint32_t size);
    void WakeAt(int64_t t);
};

struct NodeState
{
    ns3::Ptr<ns3::Node> node;
    bool is_switch = false;
    std::vector<Port*> ports;
    uint64_t buffer_used = 0;
    uint64_t headroom_total = 0;
    uint64_t max_buffer = 0;
};

// One RDMA RC queue pair: the messages of one (source NPU, destination NPU,
// stream tag) in order, with one rate limiter and congestion-control state.
struct Qp
{
    Fabric* fab = nullptr;
    uint32_t id = 0;
    Port* port = nullptr;
    double line_rate = 0;           // bit/s of the first link
    int64_t base_rtt = 0;           // ps
    // Messages with packets to (re)send, oldest first: a few at a time (a vector, as an
    // empty std::deque allocates some 600 bytes, for each of the run's queue pairs).
    std::vector<Flow*> to_send;
    std::vector<Flow*> open;        // messages not yet fully acknowledged
    bool in_port = false;

    double rate = 0;                // current rate Rc, bit/s
    int64_t next_send = 0;          // ps, rate limiter
    uint64_t sent_total = 0;        // data packets sent on this QP (HPCC's sequence)
    // DCQCN reaction point.
    double target = 0, alpha = 1.0;
    int t_stage = 0, b_stage = 0;
    uint64_t b_bytes = 0;
    bool cnp_in_period = false;
    ns3::EventId alpha_event, rate_event;
    // HPCC.
    double window = 0, window_c = 0, u = 0; // bytes, bytes, utilization estimate
    int inc_stage = 0;
    uint64_t last_update_seq = 0;
    IntTag last_int;
    bool have_int = false;
    // TIMELY.
    int64_t prev_rtt = -1;          // ps; -1 before the first sample
    double rtt_diff = 0;            // ps
    // DCTCP.
    double dctcp_alpha = 1.0;
    uint64_t window_acks = 0, window_marks = 0;
    bool cwr = false;               // a cut was made in this window
    uint64_t cwr_until = 0;         // sequence that ends it
    // Fast-forward: wire start times (ns-3 ps) of the first and last data packet
    // of the current window, their count, and the previous window's rate
    // (packets per ps, -1: none).
    int64_t ff_first = 0, ff_last = 0;
    uint64_t ff_count = 0;
    double ff_prev_rate = -1;
    // ... and of the data packets delivered in order at the receiver (ns-3 ps).
    int64_t ff_rx_first = 0, ff_rx_last = 0;
    uint64_t ff_rx_count = 0;
    uint64_t ff_cnps_start = 0;     // CNPs received before the window
    uint64_t cnps_received = 0;     // CNPs received on this queue pair
    bool ff_listed = false;         // in Fabric::ff_qps_
    bool ff_deferred = false;       // starts sending after this instant's check (Fabric::FfStart)
    uint64_t route_hash = 0;        // FNV-1a of route (a part's signature combines them)
    double ff_cc_min = 0, ff_cc_max = 0; // the congestion control's rate in the window, bit/s
    double ff_drift = 0;            // relative change of the rate since ff_base_rate, per ps
    double ff_base_rate = -1;       // packets per ps: the first window's rate since the windows began
    int64_t ff_base_time = 0;       // ps: that window's midpoint
    uint32_t src = 0, dst = 0;      // nodes
    std::vector<uint32_t> route;    // port ids of its messages' route, src -> dst
    std::vector<uint32_t> ack_route; // ... and of their ACKs' route, dst -> src
    // Its part of the fabric (the queue pairs sharing ports with it) is being
    // measured: all of that part's queue pairs carry the same values.
    int ff_phase = 0;               // 0 settling, 1 measuring
    bool ff_dirty = false;          // a message started or ended, a retransmission
    bool ff_memo_hit = false;       // the previous window's rates came from the memo
    int64_t ff_due = 0;             // ps: the end of the settling or of the window
    int64_t ff_window = 0;          // ps: the window's length
    int64_t ff_window_cap = 0;      // ps: the longest it may grow
    int64_t ff_window_start = 0;    // ps
    int64_t ff_prev_length = 0;     // ps: the previous window's length
    // The jump it waits out: its number (0: none), the message it skipped
    // packets of, how many, at what rate (packets per ps) and until when (ps).
    uint64_t ff_hold = 0;
    Flow* ff_hold_flow = nullptr;
    uint64_t ff_hold_skip = 0;
    double ff_hold_rate = 0;
    int64_t ff_hold_end = 0;

    void Init(Port* first, int64_t rtt);
    void Hold(int64_t ps);  // a fast-forward: wait, with the CC's timers, as if no time passed
    void Shift(int64_t ps); // moves the next send and the CC's timers by ps (< 0: earlier)
    void Add(Flow* f);
    void Resend(Flow* f);
    void Close(Flow* f);
    bool CanSend() const;
    ns3::Ptr<ns3::Packet> MakePacket(int64_t start_at);
    void OnCnp();
    void OnHpccAck(const IntTag& tag, uint64_t ack_seq);
    void OnPintAck(const PintTag& tag, uint64_t ack_seq);
    void OnTimelyAck(int64_t rtt, uint64_t ack_seq);
    void OnDctcpAck(bool marked, uint64_t ack_seq);

  private:
    void SetWindow(double utilization, uint64_t ack_seq);
    void SetRate(double new_rate);
    void RateIncrease();
    void OnAlphaTimer();
    void OnRateTimer();
};

// One message on a queue pair: go-back-N sender state and the receiver.
struct Flow
{
    Fabric* fab = nullptr;
    Qp* qp = nullptr;
    uint32_t id = 0;
    uint64_t size = 0;
    uint32_t npkts = 1;
    int64_t start = 0, finish = -1; // ps
    uint64_t qp_base = 0;           // the QP's sequence number of this message's PSN 0

    // Sender.
    uint32_t snd_nxt = 0, snd_una = 0;
    bool sender_done = false;
    int64_t last_progress = 0;
    uint32_t timeouts_in_row = 0;
    ns3::EventId rto_event;
    uint64_t packets_sent = 0, retransmits = 0, timeouts = 0, cnps_received = 0;

    // Receiver.
    uint32_t expected = 0;
    bool nack_pending = false;
    uint32_t since_ack = 0;
    int64_t last_cnp = INT64_MIN / 2;
    uint64_t delivered_bytes = 0, cnps_sent = 0;
    bool delivered = false;

    // Fast-forward: data packets skipped rather than simulated; counted as sent.
    uint64_t ff_packets = 0;


    uint32_t Payload(uint32_t psn) const;
    ns3::Ptr<ns3::Packet> MakePacket();
    void Start();
    void OnData(ns3::Ptr<ns3::Packet> p, const RoceHeader& h);
    void OnControl(ns3::Ptr<ns3::Packet> p, const RoceHeader& h);

  private:
    void SendBack(uint8_t kind, uint32_t psn, ns3::Ptr<ns3::Packet> data = nullptr);
    void GoBack(uint32_t psn);
    void Finish();
    void OnRto();
    void ArmRto();
};

struct QueueSample
{
    int64_t t;
    uint32_t port;
    uint64_t bytes;
};

struct FlowSample
{
    int64_t t;
    uint32_t flow;
    uint64_t delivered;
    double rate;
};

class Fabric
{
  public:
    explicit Fabric(const Config& cfg);
    ~Fabric();

    Config cfg;
    std::vector<NodeState> nodes;
    std::vector<Port*> ports; // by id; null where the caller has no such link
    std::deque<Flow> flows;   // by id (ids are dense, from 0)
    std::deque<Qp> qps;       // by id (dense, from 0)
    std::vector<uint32_t> completed;
    std::vector<Flow*> active;
    std::mt19937_64 rng;
    std::string error;
    uint64_t misrouted = 0;
    uint32_t data_extra = 0;  // cfg.DataExtra(), once: every data packet and ACK reads it
    // Bytes on the wire of a full data frame and of an ACK (cpp/roce.h overheads).
    uint32_t DataWire() const { return cfg.payload + kDataOverhead + data_extra; }
    uint32_t AckWire() const { return kAckOverhead + data_extra; }
    // Fast-forward counters: ps skipped (summed over the parts of the fabric
    // that jumped), jumps, messages started on a port whose queue pairs were
    // waiting out a jump, and the ps left of those waits then.
    int64_t ff_skipped = 0;
    uint64_t ff_jumps = 0, ff_conflicts = 0;
    int64_t ff_conflict_ps = 0;
    int64_t max_base_rtt = 0; // ps, the longest base RTT of any flow so far (PINT's T)

    std::vector<QueueSample> queue_samples;
    std::vector<FlowSample> flow_samples;

    int AddNode(bool is_switch);
    int AddCable(uint32_t link_ab, uint32_t link_ba, uint32_t a, uint32_t b,
                 double rate_ab, double rate_ba, int64_t delay,
                 double kmin_ab, double kmax_ab, double pmax_ab,
                 double kmin_ba, double kmax_ba, double pmax_ba);
    int AddQp(uint32_t id, uint32_t src, uint32_t dst, const uint32_t* fwd, int nfwd,
              const uint32_t* rev, int nrev);
    int StartFlow(uint32_t id, uint32_t qp, uint64_t size);
    int Run(int64_t until);

    // Called by ports and flows.
    void OnPacket(Port* in, ns3::Ptr<ns3::Packet> p);
    void ReleaseBuffer(Port* egress, const Transit& t);
    void Complete(Flow* f);
    void Fail(const std::string& why);
    uint64_t XoffThreshold(const NodeState& n) const;
    uint64_t XonDelta() const;
    double Uniform();
    void Changed(Qp* q);      // a message started or ended, a retransmission
    void Changed(Port* p);    // a pause, a resume, a drop
    void FfAdd(Qp* q);        // q has messages again
    void FfStart(Flow* f);    // starts f, counting a conflict with a jump in progress

  private:
    void Forward(Port* in, ns3::Ptr<ns3::Packet> p, const RoceHeader& h, const std::vector<uint32_t>& route);
    void SendPfc(Port* port, bool pause);
    void Sample();
    // Fast-forward (fastforward.cc): one part of the fabric, the queue pairs
    // sharing ports (directly or through others), at a time.
    struct FfPart
    {
        Qp** qps;          // by id
        size_t nqps;
        std::vector<Port*> ports;
        uint64_t signature; // FNV-1a of the queue pairs' routes
    };
    struct FfPattern
    {
        std::vector<double> rates;       // packets per ps, per queue pair of the part
        std::vector<double> queue_means; // bytes, per port of the part
        bool quiet = false;              // no CNP, ECN mark or pause, no CC that may move
    };
    void FfSchedule(int64_t delay);
    void FfCheck();
    void FfCheckParts();
    void FfRestart(FfPart& part);
    void FfStartWindows(FfPart& part);
    bool FfQuickJump(FfPart& part);
    bool FfSteady(FfPart& part);
    void FfRemember(FfPart& part);
    bool FfJump(FfPart& part, int64_t window);
    void FfSkip(Flow* f, int64_t packets, int64_t acks);
    void FfGiveBack(uint64_t hold);
    struct FfHold
    {
        std::vector<Qp*> qps;
        int64_t end; // ps: the longest wait's end
    };
    std::unordered_map<uint64_t, FfHold> ff_holds_; // jumps still waited out, by number
    std::vector<Qp*> ff_qps_;     // queue pairs with messages (in_port)
    std::vector<Qp*> ff_deferred_; // queue pairs that start sending once the check has run
    std::unordered_set<uint64_t> ff_quiet_routes_; // routes (route_hash) of the memo's quiet patterns
    std::vector<size_t> ff_parent_;
    uint64_t ff_stamp_ = 0;
    std::unordered_map<uint64_t, FfPattern> ff_memo_;
    ns3::EventId ff_event_;
    int64_t ff_event_due_ = -1;
    bool stop_pending_ = false;
    ns3::EventId stop_event_;
    ns3::EventId monitor_event_;
};

} // namespace astra_ns3

#endif
