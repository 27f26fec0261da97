/* class_overheads.cpp — a SimGrid 3.32 platform loader that charges each message the per-message
 * overheads of its class (two cores of a socket, two sockets of a node, two nodes).
 *
 * SMPI's smpi/os, smpi/or and smpi/ois are one value per message size for the whole platform (or
 * per host): they cannot say that a message between two sockets costs its sender and its receiver
 * more CPU time than one between two cores of a socket. SMPI's cost callbacks can
 * (smpi_register_op_cost_callback: SEND, ISEND and RECV, given the size and both hosts), and a
 * platform may be a shared library whose load_platform() builds it (SimGrid's own example:
 * examples/smpi/comm_dynamic_costs). mpilab.simulate.overheads compiles this file once and gives
 * smpirun `-platform <dir>/<name>.xml.so`, a link to the library next to (a link to) the platform
 * file <name>.xml: load_platform() loads the file whose name is its own less ".so", reads the
 * per-class overheads from the root zone's property mpilab/overheads ("core:S:R:I;socket:...;node:
 * ...", µs: send, receive, isend) and mpilab/overheads-per-byte ("S:R", µs per byte), and
 * registers the callbacks. A pair's class comes from the kit's host names,
 * <prefix><node>-s<socket>-c<core>; hosts named otherwise are nodes of their own (SimGrid's own
 * answer), a message to oneself is of the core class. SMPI calls SEND only for eager sends and
 * RECV only for eager messages, as with smpi/os and smpi/or; ISEND for every MPI_Isend.
 */
#include <dlfcn.h>
#include <simgrid/s4u.hpp>
#include <smpi/smpi.h>
#include <xbt/log.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <unordered_map>

namespace sg4 = simgrid::s4u;

namespace {

struct Overheads {
  double send = 0, recv = 0, isend = 0;  // seconds
};
Overheads by_class[3];  // core, socket, node
double send_per_byte = 0, recv_per_byte = 0;

struct Where {
  std::string node;
  long socket = 0;
  bool named = false;
};
std::unordered_map<const sg4::Host*, Where> where;

const Where& locate(const sg4::Host* host)
{
  auto it = where.find(host);
  if (it != where.end())
    return it->second;
  Where w;
  const std::string& name = host->get_name();
  auto c = name.rfind("-c");
  auto s = c == std::string::npos || c == 0 ? std::string::npos : name.rfind("-s", c - 1);
  if (s != std::string::npos) {
    char* end = nullptr;
    w.socket = std::strtol(name.c_str() + s + 2, &end, 10);
    w.named  = end == name.c_str() + c;
    w.node   = name.substr(0, s);
  }
  return where.emplace(host, w).first->second;
}

int class_of(const sg4::Host* src, const sg4::Host* dst)
{
  if (src == nullptr || dst == nullptr || src == dst)
    return 0;
  const Where& a = locate(src);
  const Where& b = locate(dst);
  if (!a.named || !b.named || a.node != b.node)
    return 2;
  return a.socket == b.socket ? 0 : 1;
}

void parse(const sg4::NetZone* zone)
{
  const char* text = zone->get_property("mpilab/overheads");
  xbt_assert(text != nullptr, "the platform has no zone property mpilab/overheads");
  std::stringstream all(text);
  std::string item;
  int seen = 0;
  while (std::getline(all, item, ';')) {
    std::stringstream one(item);
    std::string cls;
    char colon[3];
    double s, r, i;
    std::getline(one, cls, ':');
    one >> s >> colon[0] >> r >> colon[1] >> i;
    xbt_assert(!one.fail() && colon[0] == ':' && colon[1] == ':', "bad mpilab/overheads item '%s'",
               item.c_str());
    int k = cls == "core" ? 0 : cls == "socket" ? 1 : cls == "node" ? 2 : -1;
    xbt_assert(k >= 0, "bad class '%s' in mpilab/overheads; valid: core, socket, node", cls.c_str());
    by_class[k] = {s * 1e-6, r * 1e-6, i * 1e-6};
    seen |= 1 << k;
  }
  xbt_assert(seen == 7, "mpilab/overheads must give core, socket and node: '%s'", text);
  if (const char* slopes = zone->get_property("mpilab/overheads-per-byte")) {
    std::stringstream one(slopes);
    char colon;
    one >> send_per_byte >> colon >> recv_per_byte;
    xbt_assert(!one.fail() && colon == ':', "bad mpilab/overheads-per-byte '%s'", slopes);
    send_per_byte *= 1e-6;
    recv_per_byte *= 1e-6;
  }
}

} // namespace

extern "C" void load_platform(const sg4::Engine& e)
{
  Dl_info self;
  xbt_assert(dladdr(reinterpret_cast<void*>(&load_platform), &self) && self.dli_fname != nullptr,
             "cannot tell the loader's own file name");
  std::string xml = self.dli_fname;
  xbt_assert(xml.size() > 3 && xml.compare(xml.size() - 3, 3, ".so") == 0,
             "the loader must be named <platform file>.so, not %s", self.dli_fname);
  xml.resize(xml.size() - 3);
  // the file's own smpi/os, smpi/or, smpi/ois (the core class's, for runs without this loader)
  // are replaced by the callbacks: SimGrid would warn once per host and operation
  xbt_log_control_set("smpi_host.thres:error");
  e.load_platform(xml);
  parse(e.get_netzone_root());
  smpi_register_op_cost_callback(SmpiOperation::SEND, [](size_t size, sg4::Host* src, sg4::Host* dst) {
    return by_class[class_of(src, dst)].send + send_per_byte * static_cast<double>(size);
  });
  smpi_register_op_cost_callback(SmpiOperation::ISEND, [](size_t size, sg4::Host* src, sg4::Host* dst) {
    return by_class[class_of(src, dst)].isend + send_per_byte * static_cast<double>(size);
  });
  smpi_register_op_cost_callback(SmpiOperation::RECV, [](size_t size, sg4::Host* src, sg4::Host* dst) {
    return by_class[class_of(src, dst)].recv + recv_per_byte * static_cast<double>(size);
  });
}
