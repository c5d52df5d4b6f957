// InfiniBand/RoCE port state and counters of the RDMA NICs (sys/class/infiniband/<dev>/ports/<n>,
// read by the host sampler): a GPU's NIC whose link went down, trained at a lower rate than its
// peers or keeps retrying stalls every collective of the job that uses it.
//
// Names: node_exporter's infiniband collector's (node_infiniband_<x>) with polyaccel_rdma_ in
// place of node_infiniband_, so a query or dashboard written for node_exporter ports by that one
// change; the driver's hw_counters (which node_exporter does not read) are
// polyaccel_rdma_hw_<file>. Each series carries the device, port, the NIC's id and PCI address, its
// NUMA node and the GPUs NCCL pairs with it (discover/links.h nccl_nics), which node_exporter
// cannot know.
#include "exporter/collector.h"
#include "exporter/families.h"

namespace polyaccel::exporter {
namespace {

using prometheus::MetricType;

struct Counter {
  const char* file;    // counters/<file>
  const char* suffix;  // node_exporter's name after node_infiniband_
  const char* help;
  double scale;  // port_rcv_data and port_xmit_data count 4-byte words
};

// The IB PortCounters node_exporter reads (collector/infiniband_linux.go), by file name.
constexpr Counter kCounters[] = {
    {"excessive_buffer_overrun_errors", "excessive_buffer_overrun_errors_total",
     "Number of times that OverrunErrors consecutive flow control update periods occurred.", 1},
    {"link_downed", "link_downed_total",
     "Number of times the link failed to recover from an error and went down.", 1},
    {"link_error_recovery", "link_error_recovery_total",
     "Number of times the link successfully recovered from an error state.", 1},
    {"local_link_integrity_errors", "local_link_integrity_errors_total",
     "Number of times that the frequency of packets containing local physical errors exceeded "
     "the local link integrity threshold.",
     1},
    {"multicast_rcv_packets", "multicast_packets_received_total",
     "Number of multicast packets received.", 1},
    {"multicast_xmit_packets", "multicast_packets_transmitted_total",
     "Number of multicast packets transmitted.", 1},
    {"port_rcv_constraint_errors", "port_constraint_errors_received_total",
     "Number of packets received on the port that were discarded for a constraint.", 1},
    {"port_xmit_constraint_errors", "port_constraint_errors_transmitted_total",
     "Number of packets not transmitted from the port for a constraint.", 1},
    {"port_rcv_data", "port_data_received_bytes_total",
     "Number of data octets received on all links (the kernel's port_rcv_data counts 4-byte "
     "words; multiplied by 4).",
     4},
    {"port_xmit_data", "port_data_transmitted_bytes_total",
     "Number of data octets transmitted on all links (the kernel's port_xmit_data counts 4-byte "
     "words; multiplied by 4).",
     4},
    {"port_rcv_switch_relay_errors", "port_receive_switch_relay_errors_total",
     "Number of packets received on the port that were discarded because they could not be "
     "forwarded by the switch relay.",
     1},
    {"port_xmit_discards", "port_discards_transmitted_total",
     "Number of outbound packets discarded by the port because the port is down or congested.", 1},
    {"port_rcv_errors", "port_errors_received_total",
     "Number of packets containing an error that were received on this port.", 1},
    {"port_rcv_packets", "port_packets_received_total",
     "Number of packets received on all VLs by this port (including errors).", 1},
    {"port_xmit_packets", "port_packets_transmitted_total",
     "Number of packets transmitted on all VLs from this port (including errors).", 1},
    {"port_xmit_wait", "port_transmit_wait_total",
     "Number of ticks during which the port had data to transmit but no data was sent during the "
     "entire tick.",
     1},
    {"port_rcv_remote_physical_errors", "port_receive_remote_physical_errors_total",
     "Number of packets marked with the EBP delimiter received on the port.", 1},
    {"symbol_error", "symbol_error_total",
     "Number of minor link errors detected on one or more physical lanes.", 1},
    {"unicast_rcv_packets", "unicast_packets_received_total", "Number of unicast packets received.",
     1},
    {"unicast_xmit_packets", "unicast_packets_transmitted_total",
     "Number of unicast packets transmitted.", 1},
    {"VL15_dropped", "vl15_dropped_total",
     "Number of incoming VL15 packets dropped due to resource limitations.", 1},
};

// The driver's hw_counters (mlx5 names; other drivers share many), each with what it means.
struct HwCounter {
  const char* file;
  const char* help;
};
constexpr HwCounter kHwCounters[] = {
    {"duplicate_request", "Received packets that were a duplicate of an earlier request."},
    {"implied_nak_seq_err",
     "Times the requester detected an ACK with a PSN larger than expected "
     "for a read or atomic response (an implied NAK)."},
    {"local_ack_timeout_err",
     "Times a sender QP's ack timer expired (RC, XRC, DCT QPs): a lost packet or peer."},
    {"np_cnp_sent", "Congestion notification packets sent as notification point (RoCE ECN)."},
    {"np_ecn_marked_roce_packets",
     "RoCE packets received with an ECN congestion mark (notification point)."},
    {"out_of_buffer", "Packets dropped for lack of a posted receive WQE (receive queue empty)."},
    {"out_of_sequence", "Packets received out of sequence (a NAK sequence error was sent)."},
    {"packet_seq_err", "NAK sequence errors received: the peer saw packets out of sequence."},
    {"req_cqe_error", "Requester completions with an error."},
    {"req_remote_access_errors", "Requester remote access errors (NAK remote access error)."},
    {"req_remote_invalid_request", "Requester remote invalid request errors."},
    {"resp_cqe_error", "Responder completions with an error."},
    {"resp_local_length_error", "Responder local length errors (message larger than the WQE)."},
    {"resp_remote_access_errors", "Responder remote access errors."},
    {"rnr_nak_retry_err", "Receiver-not-ready NAKs received after the retry count was exhausted."},
    {"roce_adp_retrans", "Adaptive retransmissions of RoCE traffic."},
    {"roce_adp_retrans_to", "Adaptive retransmission timeouts of RoCE traffic."},
    {"roce_slow_restart", "Slow restarts of RoCE traffic after a retransmission."},
    {"roce_slow_restart_cnps", "CNPs sent during slow restart."},
    {"roce_slow_restart_trans", "Slow restart transitions to the normal state."},
    {"rp_cnp_handled",
     "Congestion notification packets handled by the reaction point (the "
     "sender slowed down)."},
    {"rp_cnp_ignored",
     "Congestion notification packets received and ignored by the reaction point."},
    {"rx_atomic_requests", "Atomic requests received."},
    {"rx_icrc_encapsulated", "RoCE packets received with an ICRC error."},
    {"rx_read_requests", "RDMA read requests received."},
    {"rx_write_requests", "RDMA write requests received."},
};

class RdmaPortCollector : public Collector {
 public:
  std::string name() const override { return "rdma_port"; }
  Status collect(const ScrapeInput& in, Families& out) const override {
    const auto& ports = in.host->rdma_ports;
    if (ports.empty()) return Ok{};
    auto state = family("polyaccel_rdma_state_id",
                        "Port state (IB PortState: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 "
                        "ACTIVE_DEFER); node_exporter's node_infiniband_state_id.",
                        MetricType::Gauge);
    auto phys = family("polyaccel_rdma_physical_state_id",
                       "Port physical state (2 Polling, 3 Disabled, 5 LinkUp, 6 LinkErrorRecovery"
                       ", ...); node_exporter's node_infiniband_physical_state_id.",
                       MetricType::Gauge);
    auto rate = family("polyaccel_rdma_rate_bytes_per_second",
                       "Port data rate (the rate file's Gb/sec over 8); node_exporter's "
                       "node_infiniband_rate_bytes_per_second.",
                       MetricType::Gauge);
    std::vector<prometheus::MetricFamily> counters, hw;
    for (const auto& c : kCounters)
      counters.push_back(
          family(std::string("polyaccel_rdma_") + c.suffix,
                 std::string(c.help) + " node_exporter's node_infiniband_" + c.suffix + ".",
                 MetricType::Counter));
    for (const auto& c : kHwCounters)
      hw.push_back(family(std::string("polyaccel_rdma_hw_") + c.file + "_total",
                          std::string(c.help) + " The driver's hw_counters/" + c.file + ".",
                          MetricType::Counter));
    for (const auto& p : ports) {
      const RdmaPortReading& r = p.reading;
      Labels l = {{"device", r.device},
                  {"port", std::to_string(r.port)},
                  {"nic", p.nic},
                  {"pci_bus_id", p.pci_bus_id},
                  {"numa_node", p.numa_node ? std::to_string(*p.numa_node) : ""},
                  {"gpu", p.gpus}};
      if (r.state) add_sample(state, l, *r.state);
      if (r.phys_state) add_sample(phys, l, *r.phys_state);
      if (r.rate_bytes_per_second) add_sample(rate, l, *r.rate_bytes_per_second);
      for (size_t i = 0; i < std::size(kCounters); ++i) {
        auto it = r.counters.find(kCounters[i].file);
        // In double: a 64-bit word count times 4 does not wrap.
        if (it != r.counters.end())
          add_sample(counters[i], l, static_cast<double>(it->second) * kCounters[i].scale);
      }
      for (size_t i = 0; i < std::size(kHwCounters); ++i) {
        auto it = r.hw_counters.find(kHwCounters[i].file);
        if (it != r.hw_counters.end()) add_sample(hw[i], l, static_cast<double>(it->second));
      }
    }
    emit(out, {&state, &phys, &rate});
    for (auto* list : {&counters, &hw}) {
      for (auto& f : *list) {
        if (!f.metric.empty()) out.push_back(std::move(f));
      }
    }
    return Ok{};
  }
};

}  // namespace

std::unique_ptr<Collector> make_rdma_port_collector() {
  return std::make_unique<RdmaPortCollector>();
}

}  // namespace polyaccel::exporter
