// RoceHeader (the RoCEv2/PFC frame as ns-3 sees it) and IntTag (HPCC's INT records).
#include "roce.h"

#include <cmath>

namespace astra_ns3
{

// Bytes of the header that carry fields; the rest of `size` is zero padding
// standing for the Ethernet/IP/UDP/BTH bytes whose contents we never read.
static constexpr uint32_t kFieldBytes = 1 + 1 + 2 + 4 * 4;

ns3::TypeId
RoceHeader::GetTypeId()
{
    static ns3::TypeId tid = ns3::TypeId("astra_ns3::RoceHeader")
                                 .SetParent<ns3::Header>()
                                 .SetGroupName("AstraNs3")
                                 .AddConstructor<RoceHeader>();
    return tid;
}

ns3::TypeId
RoceHeader::GetInstanceTypeId() const
{
    return GetTypeId();
}

uint32_t
RoceHeader::GetSerializedSize() const
{
    return size;
}

void
RoceHeader::Serialize(ns3::Buffer::Iterator i) const
{
    i.WriteU8(kind);
    i.WriteU8(flags);
    i.WriteHtonU16(size);
    i.WriteHtonU32(src);
    i.WriteHtonU32(dst);
    i.WriteHtonU32(flow);
    i.WriteHtonU32(psn);
    i.WriteU8(0, size - kFieldBytes);
}

uint32_t
RoceHeader::Deserialize(ns3::Buffer::Iterator i)
{
    kind = i.ReadU8();
    flags = i.ReadU8();
    size = i.ReadNtohU16();
    src = i.ReadNtohU32();
    dst = i.ReadNtohU32();
    flow = i.ReadNtohU32();
    psn = i.ReadNtohU32();
    return size;
}

void
RoceHeader::Print(std::ostream& os) const
{
    static const char* names[] = {"DATA", "ACK", "NACK", "CNP", "PFC"};
    os << names[kind < 5 ? kind : 0] << " flow=" << flow << " psn=" << psn << " " << src << "->"
       << dst << ((flags & kFlagCe) ? " CE" : "") << ((flags & kFlagPause) ? " XOFF" : "");
}

ns3::TypeId
IntTag::GetTypeId()
{
    static ns3::TypeId tid = ns3::TypeId("astra_ns3::IntTag")
                                 .SetParent<ns3::Tag>()
                                 .SetGroupName("AstraNs3")
                                 .AddConstructor<IntTag>();
    return tid;
}

ns3::TypeId
IntTag::GetInstanceTypeId() const
{
    return GetTypeId();
}

uint32_t
IntTag::GetSerializedSize() const
{
    return 1 + n * (8 + 8 + 8 + 8);
}

void
IntTag::Serialize(ns3::TagBuffer i) const
{
    i.WriteU8(n);
    for (int k = 0; k < n; ++k)
    {
        i.WriteU64(static_cast<uint64_t>(hops[k].ts));
        i.WriteU64(hops[k].tx_bytes);
        i.WriteU64(hops[k].qlen);
        i.WriteDouble(hops[k].rate);
    }
}

void
IntTag::Deserialize(ns3::TagBuffer i)
{
    n = i.ReadU8();
    for (int k = 0; k < n; ++k)
    {
        hops[k].ts = static_cast<int64_t>(i.ReadU64());
        hops[k].tx_bytes = i.ReadU64();
        hops[k].qlen = i.ReadU64();
        hops[k].rate = i.ReadDouble();
    }
}

void
IntTag::Print(std::ostream& os) const
{
    os << "INT hops=" << int(n);
}

// -- TIMELY's timestamp and PINT's digest ------------------------------------------------

ns3::TypeId
TimestampTag::GetTypeId()
{
    static ns3::TypeId tid = ns3::TypeId("astra_ns3::TimestampTag")
                                 .SetParent<ns3::Tag>()
                                 .SetGroupName("AstraNs3")
                                 .AddConstructor<TimestampTag>();
    return tid;
}

ns3::TypeId
TimestampTag::GetInstanceTypeId() const
{
    return GetTypeId();
}

uint32_t
TimestampTag::GetSerializedSize() const
{
    return 8;
}

void
TimestampTag::Serialize(ns3::TagBuffer i) const
{
    i.WriteU64(static_cast<uint64_t>(ts));
}

void
TimestampTag::Deserialize(ns3::TagBuffer i)
{
    ts = static_cast<int64_t>(i.ReadU64());
}

void
TimestampTag::Print(std::ostream& os) const
{
    os << "ts=" << ts;
}

ns3::TypeId
PintTag::GetTypeId()
{
    static ns3::TypeId tid = ns3::TypeId("astra_ns3::PintTag")
                                 .SetParent<ns3::Tag>()
                                 .SetGroupName("AstraNs3")
                                 .AddConstructor<PintTag>();
    return tid;
}

ns3::TypeId
PintTag::GetInstanceTypeId() const
{
    return GetTypeId();
}

uint32_t
PintTag::GetSerializedSize() const
{
    return 2;
}

void
PintTag::Serialize(ns3::TagBuffer i) const
{
    i.WriteU16(static_cast<uint16_t>(power));
}

void
PintTag::Deserialize(ns3::TagBuffer i)
{
    power = static_cast<int16_t>(i.ReadU16());
}

void
PintTag::Print(std::ostream& os) const
{
    os << "PINT power=" << power;
}

// -- per-algorithm header sizes and PINT's encoding -----------------------------------------

uint32_t
Config::DataExtra() const
{
    if (cc == kCcHpcc)
    {
        return kIntBytes;
    }
    if (cc == kCcHpccPint)
    {
        // Enough bits for every power up to log_base(512^2) (artifact third.cc).
        double powers = std::log(kPintScale * kPintScale) / std::log(pint_log_base);
        int bits = static_cast<int>(std::ceil(std::log2(powers)));
        return static_cast<uint32_t>((bits + 7) / 8);
    }
    return 0;
}

int
Config::PintEncode(double u, double uniform) const
{
    double scaled = std::max(1.0, std::ceil(u * kPintScale));
    double exact = std::log(scaled) / std::log(pint_log_base);
    double low = std::floor(exact);
    double below = std::pow(pint_log_base, low);
    double above = std::pow(pint_log_base, low + 1);
    // Round up with the probability that keeps the decoded value unbiased.
    bool up = above > below && uniform < (scaled - below) / (above - below);
    return static_cast<int>(low) + (up ? 1 : 0);
}

double
Config::PintDecode(int power) const
{
    return std::pow(pint_log_base, power) / kPintScale;
}

} // namespace astra_ns3
