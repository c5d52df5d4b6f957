#include "render/nccl_guest.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "core/number.h"
#include "core/strings.h"
#include "place/xml_tree.h"

namespace polyaccel::render {

namespace {

using place::xml::attr;
using place::xml::child;
using place::xml::has_attr;
using place::xml::is;

// An address attribute: libvirt writes 0x.. or decimal. A sign, blanks or a leading 0 (octal to
// libvirt, decimal to a reader) is none: strtoul read "-18446744073709551615" as 1.
std::optional<unsigned> number(const std::string& text, unsigned max) {
  const bool hex = text.starts_with("0x") || text.starts_with("0X");
  if (!hex && text.size() > 1 && text.front() == '0') return std::nullopt;
  auto v = hex ? parse_hex(text, "address", max) : parse_unsigned(text, "address", 0, max);
  if (!v) return std::nullopt;
  return static_cast<unsigned>(*v);
}

std::string hex_number(unsigned v) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  do {
    out.insert(out.begin(), digits[v & 15]);
    v >>= 4;
  } while (v);
  return "0x" + out;
}

// One numeric attribute of `element`: nullopt when absent; a present value that is not a number
// in 0..max is refused naming the element, the attribute and the value, never read as 0 or
// wrapped into range (a source domain 0x10000 was read as 0000, a bus 0x1cb as cb).
Result<std::optional<unsigned>> number_attribute(xmlNode* element, const char* name, unsigned max,
                                                 const std::string& xml_name,
                                                 const std::string& where) {
  if (!has_attr(element, name)) return std::optional<unsigned>();
  const std::string text = attr(element, name);
  auto v = number(text, max);
  if (!v)
    return bad_input(xml_name, where + " " + name + "=" + quote_input(text) +
                                   " is not a number in 0.." + hex_number(max));
  return std::optional<unsigned>(*v);
}

struct Address {
  unsigned domain = 0, bus = 0, slot = 0, function = 0;
};

// A PCI <address>: nullopt when there is none or it lacks bus or slot; an Error when a field is
// out of its range (domain 16 bits, slot 5, function 3; bus 8 on the host, while in the guest it
// is a controller's index, numbered later: nccl_guest_view refuses what lands past bus 255).
Result<std::optional<Address>> address_of(xmlNode* a, const std::string& xml_name,
                                          const std::string& where, unsigned bus_max) {
  if (!a) return std::optional<Address>();
  const std::string element = where + " <address>";
  auto domain = number_attribute(a, "domain", 0xffff, xml_name, element);
  if (!domain) return domain.error();
  auto bus = number_attribute(a, "bus", bus_max, xml_name, element);
  if (!bus) return bus.error();
  auto slot = number_attribute(a, "slot", 0x1f, xml_name, element);
  if (!slot) return slot.error();
  auto function = number_attribute(a, "function", 0x7, xml_name, element);
  if (!function) return function.error();
  if (!*bus || !*slot) return std::optional<Address>();
  return std::optional<Address>(Address{domain->value_or(0), **bus, **slot, function->value_or(0)});
}

struct Controller {
  unsigned index = 0;
  std::string model;
  std::optional<unsigned> bus_nr;  // pcie-expander-bus / pci-expander-bus
  std::optional<Address> address;  // where it is plugged: bus is the parent controller's index
};

// Firmware numbering, depth first (see the header): a controller gets the next bus number, then
// everything below it is numbered before its next sibling; an expander bus starts its own count
// at busNr + 1. Iterative with the children listed once, so that a long chain of bridges (a
// hostile file may hold 60,000) costs linear time and no stack.
void number_buses(const std::vector<Controller>& controllers,
                  std::map<unsigned, unsigned>& bus_of) {
  std::map<unsigned, std::vector<const Controller*>> below;
  for (const auto& c : controllers) {
    if (c.address && c.address->bus != c.index) below[c.address->bus].push_back(&c);
  }
  for (auto& [parent, children] : below) {
    std::stable_sort(children.begin(), children.end(),
                     [](const Controller* a, const Controller* b) {
                       return std::pair(a->address->slot, a->address->function) <
                              std::pair(b->address->slot, b->address->function);
                     });
  }
  static const std::vector<const Controller*> kNone;
  auto children_of = [&](unsigned index) -> const std::vector<const Controller*>& {
    auto it = below.find(index);
    return it == below.end() ? kNone : it->second;
  };
  std::deque<unsigned> counters{1};  // the root's count; one more per expander bus
  struct Frame {
    const std::vector<const Controller*>* children;
    size_t next_child;
    unsigned* counter;
  };
  std::vector<Frame> stack{{&children_of(0), 0, &counters.front()}};
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.next_child == f.children->size()) {
      stack.pop_back();
      continue;
    }
    const Controller* c = (*f.children)[f.next_child++];
    if (bus_of.count(c->index)) continue;  // a loop in a broken file
    unsigned* counter = f.counter;
    if (c->bus_nr) {
      bus_of[c->index] = *c->bus_nr;
      counters.push_back(*c->bus_nr + 1);
      counter = &counters.back();
    } else {
      bus_of[c->index] = (*counter)++;
    }
    stack.push_back({&children_of(c->index), 0, counter});
  }
}

}  // namespace

Result<NcclGuestView> nccl_guest_view(const place::Placement& placement,
                                      const std::string& xml_name, const std::string& xml_text) {
  auto doc = place::xml::parse_untrusted(xml_text, xml_name);
  if (!doc) return bad_input(xml_name, "is not well-formed XML");
  xmlNode* domain = xmlDocGetRootElement(doc.get());
  if (!is(domain, "domain")) return bad_input(xml_name, "is not a libvirt domain (no <domain>)");
  xmlNode* devices = child(domain, "devices");

  std::vector<Controller> controllers;
  std::vector<std::pair<Address, Address>> hostdevs;  // host source, guest address
  for (xmlNode* d = devices ? devices->children : nullptr; d; d = d->next) {
    if (is(d, "controller") && attr(d, "type") == "pci") {
      Controller c;
      auto index = number_attribute(d, "index", 0xffff, xml_name, "a PCI <controller>");
      if (!index) return index.error();
      if (!*index) return bad_input(xml_name, "a PCI controller has no index");
      c.index = **index;
      c.model = attr(d, "model");
      if (xmlNode* t = child(d, "target")) {
        auto bus_nr = number_attribute(t, "busNr", 0xff, xml_name, "a PCI controller's <target>");
        if (!bus_nr) return bus_nr.error();
        c.bus_nr = *bus_nr;
      }
      auto address = address_of(child(d, "address"), xml_name, "a PCI controller's", 0xffff);
      if (!address) return address.error();
      c.address = *address;
      controllers.push_back(c);
    }
    if (is(d, "hostdev") && attr(d, "type") == "pci") {
      auto host = address_of(child(child(d, "source"), "address"), xml_name,
                             "a PCI <hostdev>'s <source>", 0xff);
      if (!host) return host.error();
      auto guest = address_of(child(d, "address"), xml_name, "a PCI <hostdev>'s guest", 0xffff);
      if (!guest) return guest.error();
      if (!*host) return bad_input(xml_name, "a PCI <hostdev> has no source address");
      if (!*guest) {
        return bad_input(xml_name, "a PCI <hostdev> has no guest address",
                         "give the XML as `virsh dumpxml` prints it (libvirt fills addresses in)");
      }
      hostdevs.emplace_back(**host, **guest);
    }
  }
  std::map<unsigned, unsigned> bus_of{{0, 0}};
  number_buses(controllers, bus_of);

  NcclGuestView view;
  for (const auto& [host, guest] : hostdevs) {
    PciAddress h{host.domain, static_cast<std::uint8_t>(host.bus),
                 static_cast<std::uint8_t>(host.slot), static_cast<std::uint8_t>(host.function)};
    auto bus = bus_of.find(guest.bus);
    if (bus == bus_of.end()) {
      return bad_input(xml_name, "hostdev " + h.to_string() + " sits on controller " +
                                     std::to_string(guest.bus) + ", which is not in the file");
    }
    // A PCI address has 8 bits of bus, 5 of slot and 3 of function: beyond that is no address.
    if (bus->second > 255 || guest.slot > 31 || guest.function > 7 || host.bus > 255 ||
        host.slot > 31 || host.function > 7) {
      return bad_input(xml_name, "hostdev " + h.to_string() +
                                     ": the guest address is beyond PCI's bus 255, slot 31, "
                                     "function 7");
    }
    view.addresses[h] = PciAddress{guest.domain, static_cast<std::uint8_t>(bus->second),
                                   static_cast<std::uint8_t>(guest.slot),
                                   static_cast<std::uint8_t>(guest.function)};
  }
  // Every device of the placement must be in the domain, else the file describes another guest.
  for (const auto& d : placement.devices) {
    auto a = PciAddress::parse(d.pci_bus_id);
    if (!a || !view.addresses.count(*a)) {
      return bad_input(xml_name,
                       "has no <hostdev> for " + d.pci_bus_id + " of placement " + placement.name,
                       "give the domain XML of that guest");
    }
    view.numa_nodes[*a] = d.guest_cell;
  }
  // Passed-through functions the placement does not list are not ours to describe.
  std::erase_if(view.addresses,
                [&](const auto& entry) { return !view.numa_nodes.count(entry.first); });
  if (placement.cells.empty()) {
    CpuSet all;
    for (unsigned v = 0; v < placement.vcpus; ++v)
      all.set(v);
    view.cpus[0] = all;
  }
  for (const auto& c : placement.cells) {
    CpuSet cpus;
    for (unsigned v : c.vcpus)
      cpus.set(v);
    view.cpus[c.guest_cell] = cpus;
  }
  return view;
}

}  // namespace polyaccel::render
