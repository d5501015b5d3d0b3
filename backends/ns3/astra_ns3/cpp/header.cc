// RoceHeader (the RoCEv2/PFC frame as ns-3 sees it) and IntTag (HPCC's INT records).
#include "roce.h"

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

} // namespace astra_ns3
