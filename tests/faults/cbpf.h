// Test helpers for the partition's classic-BPF programs, written independently of the generator
// (faults/src/partition.cpp): decode tc's "bytecode" text ("<count>,<code> <jt> <jf> <k>,..."),
// check it as the kernel's bpf_check_classic() would (known opcodes, forward jumps inside the
// program, a return at the end), disassemble it, and run it on a frame the way cls_bpf runs a
// classic program: loads relative to the Ethernet header, big-endian, a load past the end of the
// frame ends the program with 0 (linux/filter.h, Documentation/networking/filter.rst). Frames
// are built by Frame: Ethernet II + IPv4 (RFC 791) + TCP (RFC 9293) / UDP / ICMP, or ARP / IPv6.
#pragma once

#include <arpa/inet.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fctest::cbpf {

struct Insn {
  std::uint16_t code;
  std::uint8_t jt, jf;
  std::uint32_t k;
};

/// Decodes and checks; throws std::invalid_argument saying what is wrong.
inline std::vector<Insn> decode(const std::string& bytecode) {
  std::vector<std::string> parts;
  std::stringstream ss(bytecode);
  for (std::string p; std::getline(ss, p, ',');) parts.push_back(p);
  if (parts.empty()) throw std::invalid_argument("empty bytecode");
  const unsigned long count = std::stoul(parts[0]);
  if (count != parts.size() - 1) throw std::invalid_argument("count " + parts[0] + " but " + std::to_string(parts.size() - 1) + " instructions");
  if (count == 0 || count > 4096) throw std::invalid_argument("bad length");  // BPF_MAXINSNS
  std::vector<Insn> prog;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    std::istringstream in(parts[i]);
    unsigned long code, jt, jf, k;
    if (!(in >> code >> jt >> jf >> k) || code > 0xffff || jt > 255 || jf > 255 || k > 0xffffffffUL)
      throw std::invalid_argument("bad instruction \"" + parts[i] + "\"");
    std::string rest;
    if (in >> rest) throw std::invalid_argument("trailing text in \"" + parts[i] + "\"");
    prog.push_back({static_cast<std::uint16_t>(code), static_cast<std::uint8_t>(jt), static_cast<std::uint8_t>(jf),
                    static_cast<std::uint32_t>(k)});
  }
  for (std::size_t i = 0; i < prog.size(); ++i) {
    const Insn& n = prog[i];
    switch (n.code) {
      case 0x20: case 0x28: case 0x30: case 0x50: case 0xb1:  // ld w/h/b abs, ldb ind, ldx msh
      case 0x74: case 0x54: case 0x0c: case 0x1c: case 0x07:  // rsh k, and k, add x, sub x, tax
      case 0x06:                                              // ret k
        break;
      case 0x15: case 0x25: case 0x45:  // jeq, jgt, jset (k)
        if (i + 1 + n.jt >= prog.size() || i + 1 + n.jf >= prog.size())
          throw std::invalid_argument("instruction " + std::to_string(i) + " jumps past the end");
        break;
      default:
        throw std::invalid_argument("instruction " + std::to_string(i) + ": opcode " + std::to_string(n.code) +
                                    " is not one this decoder knows");
    }
  }
  if (prog.back().code != 0x06) throw std::invalid_argument("the program does not end with a return");
  return prog;
}

/// One line per instruction, bpf_dbg / tcpdump -d style, jump targets as absolute indices.
inline std::string disassemble(const std::vector<Insn>& prog) {
  std::ostringstream out;
  for (std::size_t i = 0; i < prog.size(); ++i) {
    const Insn& n = prog[i];
    out << i << ": ";
    auto jump = [&](const char* op) {
      out << op << " #0x" << std::hex << n.k << std::dec << " jt " << i + 1 + n.jt << " jf " << i + 1 + n.jf;
    };
    switch (n.code) {
      case 0x20: out << "ld [" << n.k << "]"; break;
      case 0x28: out << "ldh [" << n.k << "]"; break;
      case 0x30: out << "ldb [" << n.k << "]"; break;
      case 0x50: out << "ldb [x+" << n.k << "]"; break;
      case 0xb1: out << "ldxb 4*([" << n.k << "]&0xf)"; break;
      case 0x74: out << "rsh #" << n.k; break;
      case 0x54: out << "and #0x" << std::hex << n.k << std::dec; break;
      case 0x0c: out << "add x"; break;
      case 0x1c: out << "sub x"; break;
      case 0x07: out << "tax"; break;
      case 0x15: jump("jeq"); break;
      case 0x25: jump("jgt"); break;
      case 0x45: jump("jset"); break;
      case 0x06: out << "ret #" << (n.k == 0xffffffffu ? std::string("-1") : std::to_string(n.k)); break;
    }
    out << "\n";
  }
  return out.str();
}

/// Runs the program on frame; the value it returns (a load past the end: 0, as the kernel does).
inline std::uint32_t run(const std::vector<Insn>& prog, const std::vector<std::uint8_t>& frame) {
  std::uint32_t a = 0, x = 0;
  auto load = [&](std::uint64_t at, int size) -> std::optional<std::uint32_t> {
    if (at + static_cast<std::uint64_t>(size) > frame.size()) return std::nullopt;
    std::uint32_t v = 0;
    for (int i = 0; i < size; ++i) v = (v << 8) | frame[at + static_cast<std::uint64_t>(i)];
    return v;
  };
  for (std::size_t pc = 0; pc < prog.size(); ++pc) {
    const Insn& n = prog[pc];
    std::optional<std::uint32_t> v;
    switch (n.code) {
      case 0x20: if (!(v = load(n.k, 4))) return 0; a = *v; break;
      case 0x28: if (!(v = load(n.k, 2))) return 0; a = *v; break;
      case 0x30: if (!(v = load(n.k, 1))) return 0; a = *v; break;
      case 0x50: if (!(v = load(std::uint64_t{x} + n.k, 1))) return 0; a = *v; break;
      case 0xb1: if (!(v = load(n.k, 1))) return 0; x = 4 * (*v & 0xf); break;
      case 0x74: a >>= n.k; break;
      case 0x54: a &= n.k; break;
      case 0x0c: a += x; break;
      case 0x1c: a -= x; break;
      case 0x07: x = a; break;
      case 0x15: pc += a == n.k ? n.jt : n.jf; break;
      case 0x25: pc += a > n.k ? n.jt : n.jf; break;
      case 0x45: pc += (a & n.k) ? n.jt : n.jf; break;
      case 0x06: return n.k;
    }
  }
  throw std::logic_error("ran off the end");  // decode() makes this impossible
}

inline constexpr std::uint32_t kPass = 0xffffffffu;  // TC_ACT_UNSPEC: the next filter decides
inline constexpr std::uint32_t kDrop = 2;            // TC_ACT_SHOT

// TCP flags (RFC 9293 3.1).
inline constexpr std::uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kPsh = 0x08, kAck = 0x10;

/// A frame to run a program on.
struct Frame {
  enum class L3 { kIpv4, kIpv6, kArp } l3 = L3::kIpv4;
  std::string src = "10.213.0.4", dst = "10.213.0.3";
  std::uint8_t protocol = 6;       ///< 6 TCP, 17 UDP, 1 ICMP
  std::uint8_t flags = kAck;       ///< TCP flags
  std::size_t payload = 0;         ///< bytes after the TCP / UDP / ICMP header
  std::size_t ip_options = 0;      ///< bytes of IPv4 options (a multiple of 4, at most 40)
  std::size_t tcp_options = 0;     ///< bytes of TCP options (a multiple of 4, at most 40)
  std::uint16_t fragment = 0;      ///< the IPv4 flags + fragment offset field (0x2000 = MF)
  std::optional<std::uint16_t> total_length;  ///< overrides the IPv4 total length (malformed)

  [[nodiscard]] std::vector<std::uint8_t> bytes() const {
    std::vector<std::uint8_t> f(12, 0xaa);  // destination and source MAC
    auto u16 = [&f](unsigned v) {
      f.push_back(static_cast<std::uint8_t>(v >> 8));
      f.push_back(static_cast<std::uint8_t>(v));
    };
    if (l3 == L3::kArp) {
      u16(0x0806);
      f.resize(f.size() + 28, 0x01);
      return f;
    }
    if (l3 == L3::kIpv6) {
      u16(0x86dd);
      f.push_back(0x60);
      f.resize(f.size() + 3, 0);
      u16(20 + payload);  // payload length
      f.push_back(6);     // next header: TCP
      f.push_back(64);
      f.resize(f.size() + 32, 0x20);  // addresses
      f.resize(f.size() + 20 + payload, 0);
      return f;
    }
    u16(0x0800);
    const std::size_t ihl = 20 + ip_options;
    const std::size_t l4 = protocol == 6 ? 20 + tcp_options : 8;
    f.push_back(static_cast<std::uint8_t>(0x40 | (ihl / 4)));
    f.push_back(0);
    u16(total_length ? *total_length : static_cast<unsigned>(ihl + l4 + payload));
    u16(0x1234);  // identification
    u16(fragment);
    f.push_back(64);
    f.push_back(protocol);
    u16(0);  // checksum: not checked by the filter
    for (const std::string& a : {src, dst}) {
      in_addr ia{};
      if (::inet_pton(AF_INET, a.c_str(), &ia) != 1) throw std::invalid_argument(a);
      const auto* b = reinterpret_cast<const std::uint8_t*>(&ia.s_addr);
      f.insert(f.end(), b, b + 4);
    }
    f.resize(f.size() + ip_options, 0x01);  // NOP options
    if (protocol == 6) {
      u16(40000);  // source port
      u16(2379);   // destination port
      f.resize(f.size() + 8, 0x11);  // sequence and acknowledgement numbers
      f.push_back(static_cast<std::uint8_t>(((20 + tcp_options) / 4) << 4));
      f.push_back(flags);
      u16(65535);  // window
      u16(0);      // checksum
      u16(0);      // urgent pointer
      f.resize(f.size() + tcp_options, 0x01);
    } else {
      f.resize(f.size() + 8, 0x22);
    }
    f.resize(f.size() + payload, 0x5a);
    return f;
  }
};

}  // namespace fctest::cbpf
