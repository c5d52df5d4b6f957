#!/usr/bin/env python3
"""Writes the Grafana dashboards of this folder (importable JSON, schemaVersion 38).

Every panel query uses only polyaccel agent metrics; tests/exporter/prometheus_test.cc runs each
one against a real Prometheus scraping the agent and expects data. Variables are matched with
=~ so that "All" works: $instance, $gpu, and the fleet's $node. Queries of `up` select the
agent's scrape job, JOB: the name the Prometheus Operator gives it
(deploy/kubernetes/overlays/monitoring/servicemonitor.yaml). Then the monitoring overlay's copies
are brought up to date (its sync.py).

Two labels name two kinds of node: `numa_node` is the agent's NUMA node id; `node` is the
Kubernetes node, which the ServiceMonitor's relabeling sets on every series (as kube-state-metrics
and node_exporter's have it). The fleet dashboard picks hosts by `node`, which stays when the pod
and its IP (`instance`) change; its "All" is ".*" so that a Prometheus without that label (a
plain static config) still sees every host.
"""
import json
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).parent
DS = {"type": "prometheus", "uid": "${datasource}"}
JOB = "polyaccel-agent"


def variables(*names):
    out = [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"}]
    queries = {  # name: (query, the regex of "All")
        "instance": ("label_values(polyaccel_build_info, instance)", ".+"),
        "gpu": ('label_values(polyaccel_accelerator_info{instance=~"$instance"}, gpu)', ".+"),
        "node": ("label_values(polyaccel_build_info, node)", ".*"),
    }
    for n in names:
        query, all_value = queries[n]
        out.append({"name": n, "type": "query", "datasource": DS, "query": query,
                    "refresh": 2, "includeAll": True, "multi": True, "allValue": all_value,
                    "current": {"text": "All", "value": "$__all"}})
    return {"list": out}


def panel(pid, title, exprs, unit="short", kind="timeseries", x=0, y=0, w=12, h=8, legend=""):
    targets = []
    for i, e in enumerate(exprs):
        expr, fmt = (e if isinstance(e, tuple) else (e, legend))
        targets.append({"refId": chr(ord("A") + i), "datasource": DS, "expr": expr,
                        "legendFormat": fmt})
    return {"id": pid, "type": kind, "title": title, "datasource": DS, "targets": targets,
            "gridPos": {"x": x, "y": y, "w": w, "h": h},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []}, "options": {}}


def layout(panels):
    out = []
    for i, p in enumerate(panels):
        p["id"] = i + 1
        p["gridPos"].update({"x": (i % 2) * 12, "y": (i // 2) * 8})
        out.append(p)
    return out


def dashboard(uid, title, var_names, panels):
    return {"uid": uid, "title": title, "tags": ["polyaccel"], "timezone": "browser",
            "schemaVersion": 38, "version": 1, "editable": True, "refresh": "30s",
            "time": {"from": "now-6h", "to": "now"}, "templating": variables(*var_names),
            "annotations": {"list": []}, "panels": layout(panels)}


I = 'instance=~"$instance"'
N = 'node=~"$node"'
G = 'instance=~"$instance",gpu=~"$gpu"'

fleet = dashboard("polyaccel-fleet", "polyaccel / Fleet", ["node"], [
    panel(0, "Accelerators by vendor", ['count by (vendor) (polyaccel_accelerator_info{%s})' % N], kind="stat", legend="{{vendor}}"),
    panel(0, "Unhealthy accelerators", ['count(polyaccel_accelerator_healthy{%s} == 0) or vector(0)' % N], kind="stat"),
    panel(0, "Utilization by vendor", ['avg by (vendor) (polyaccel_accelerator_utilization_ratio{%s})' % N], unit="percentunit", legend="{{vendor}}"),
    panel(0, "Device memory in use by vendor", ['sum by (vendor) (polyaccel_accelerator_memory_used_bytes{%s}) / sum by (vendor) (polyaccel_accelerator_memory_total_bytes{%s})' % (N, N)], unit="percentunit", legend="{{vendor}}"),
    panel(0, "Accelerator power by node", ['sum by (node, instance) (polyaccel_accelerator_power_watts{%s})' % N], unit="watt", legend="{{node}} {{instance}}"),
    panel(0, "Accelerator energy rate by node", ['sum by (node, instance) (rate(polyaccel_accelerator_energy_joules_total{%s}[$__rate_interval]))' % N], unit="watt", legend="{{node}} {{instance}}"),
    panel(0, "Error events (1h)", ['sum by (node, instance, gpu, kind) (increase(polyaccel_accelerator_events_total{%s}[1h]))' % N], kind="table"),
    panel(0, "Hottest accelerators", ['topk(10, polyaccel_accelerator_temperature_celsius{%s,sensor="gpu"})' % N], unit="celsius", kind="table"),
    panel(0, "Agents up", ['up{job="%s",%s}' % (JOB, N)], kind="stat", legend="{{node}} {{instance}}"),
    panel(0, "Failing collectors", ['sum by (collector) (1 - polyaccel_collector_success{%s})' % N], legend="{{collector}}"),
    panel(0, "RDMA ports not ACTIVE", ['count(polyaccel_rdma_state_id{%s} != 4) or vector(0)' % N], kind="stat"),
    panel(0, "GPU NICs slower than their node's fastest", ['count(polyaccel_rdma_rate_bytes_per_second{%s,gpu!=""} < on(instance) group_left() max by (node, instance) (polyaccel_rdma_rate_bytes_per_second{%s,gpu!=""})) or vector(0)' % (N, N)], kind="stat"),
    panel(0, "RDMA traffic by node", ['sum by (node, instance) (rate(polyaccel_rdma_port_data_received_bytes_total{%s}[$__rate_interval]) + rate(polyaccel_rdma_port_data_transmitted_bytes_total{%s}[$__rate_interval]))' % (N, N)], unit="Bps", legend="{{node}} {{instance}}"),
    panel(0, "RDMA link and symbol errors (1h)", ['sum by (node, instance, device, port, gpu) (increase(polyaccel_rdma_symbol_error_total{%s}[1h]) + increase(polyaccel_rdma_link_downed_total{%s}[1h]))' % (N, N)], kind="table"),
])

node = dashboard("polyaccel-node", "polyaccel / Node", ["instance"], [
    panel(0, "Accelerator utilization", ['polyaccel_accelerator_utilization_ratio{%s}' % I], unit="percentunit", legend="{{gpu}} {{pod}}"),
    panel(0, "Accelerator temperature", ['polyaccel_accelerator_temperature_celsius{%s}' % I], unit="celsius", legend="{{gpu}} {{sensor}}"),
    panel(0, "Accelerator power", ['polyaccel_accelerator_power_watts{%s}' % I, ('polyaccel_accelerator_power_limit_watts{%s}' % I, "{{gpu}} limit")], unit="watt", legend="{{gpu}}"),
    panel(0, "Device memory used", ['polyaccel_accelerator_memory_used_bytes{%s}' % I], unit="bytes", legend="{{gpu}}"),
    panel(0, "Accelerators held by pods", ['max by (gpu, namespace, pod, container) (polyaccel_accelerator_power_watts{%s,pod!=""})' % I], kind="table"),
    panel(0, "Accelerator health", ['polyaccel_accelerator_healthy{%s}' % I, ('polyaccel_accelerator_up{%s}' % I, "{{gpu}} up")], legend="{{gpu}} healthy"),
    panel(0, "NUMA memory free", ['polyaccel_numa_memory_free_bytes{%s}' % I, ('polyaccel_numa_memory_total_bytes{%s}' % I, "NUMA {{numa_node}} total")], unit="bytes", legend="NUMA {{numa_node}} free"),
    panel(0, "NUMA misses (allocations on another node)", ['rate(polyaccel_numa_allocations_total{%s,type=~"numa_miss|other_node"}[$__rate_interval])' % I], unit="ops", legend="NUMA {{numa_node}} {{type}}"),
    panel(0, "Hugepages free per node", ['polyaccel_hugepages_free_pages{%s}' % I, ('polyaccel_hugepages_pages{%s}' % I, "NUMA {{numa_node}} {{page_size_bytes}} total")], legend="NUMA {{numa_node}} {{page_size_bytes}} free"),
    panel(0, "PCIe link width (current vs max)", ['polyaccel_pcie_link_width_lanes{%s}' % I], legend="{{device}} {{bound}}"),
    panel(0, "PCIe link speed (current vs max)", ['polyaccel_pcie_link_speed_transfers_per_second{%s}' % I], unit="none", legend="{{device}} {{bound}}"),
    panel(0, "Pinned and free PUs per node (placement state)", ['polyaccel_placement_pinned_pus{%s}' % I, ('polyaccel_placement_free_pus{%s}' % I, "NUMA {{numa_node}} free")], legend="NUMA {{numa_node}} pinned"),
    panel(0, "Tuning audit findings", ['sum by (id, severity) (polyaccel_audit_findings{%s}) > 0 or on() vector(0)' % I], kind="table"),
    panel(0, "Degraded PCIe links", ['polyaccel_pcie_link_width_lanes{%s,bound="current"} < ignoring(bound) polyaccel_pcie_link_width_lanes{%s,bound="max"} or on() vector(0)' % (I, I)], kind="stat"),
    panel(0, "RDMA port throughput", ['rate(polyaccel_rdma_port_data_received_bytes_total{%s}[$__rate_interval])' % I, ('rate(polyaccel_rdma_port_data_transmitted_bytes_total{%s}[$__rate_interval])' % I, "{{device}}/{{port}} {{gpu}} tx")], unit="Bps", legend="{{device}}/{{port}} {{gpu}} rx"),
    panel(0, "RDMA port rate and state", ['polyaccel_rdma_rate_bytes_per_second{%s}' % I, ('polyaccel_rdma_state_id{%s}' % I, "{{device}}/{{port}} state")], unit="Bps", legend="{{device}}/{{port}} {{gpu}} NUMA {{numa_node}}"),
    panel(0, "RDMA link errors per second", ['rate(polyaccel_rdma_symbol_error_total{%s}[$__rate_interval])' % I, ('rate(polyaccel_rdma_port_errors_received_total{%s}[$__rate_interval])' % I, "{{device}}/{{port}} rcv errors"), ('rate(polyaccel_rdma_link_downed_total{%s}[$__rate_interval])' % I, "{{device}}/{{port}} link downed")], unit="ops", legend="{{device}}/{{port}} symbol errors"),
    panel(0, "RDMA retransmissions and congestion per second", ['rate(polyaccel_rdma_hw_out_of_sequence_total{%s}[$__rate_interval])' % I, ('rate(polyaccel_rdma_hw_rnr_nak_retry_err_total{%s}[$__rate_interval])' % I, "{{device}}/{{port}} rnr retry errors"), ('rate(polyaccel_rdma_hw_np_cnp_sent_total{%s}[$__rate_interval])' % I, "{{device}}/{{port}} CNPs sent")], unit="ops", legend="{{device}}/{{port}} out of sequence"),
])

gpu = dashboard("polyaccel-gpu", "polyaccel / Accelerator", ["instance", "gpu"], [
    panel(0, "Utilization", ['polyaccel_accelerator_utilization_ratio{%s}' % G, ('polyaccel_accelerator_memory_utilization_ratio{%s}' % G, "{{gpu}} memory")], unit="percentunit", legend="{{gpu}} compute"),
    panel(0, "Device memory", ['polyaccel_accelerator_memory_used_bytes{%s}' % G, ('polyaccel_accelerator_memory_total_bytes{%s}' % G, "{{gpu}} total")], unit="bytes", legend="{{gpu}} used"),
    panel(0, "Temperature", ['polyaccel_accelerator_temperature_celsius{%s}' % G], unit="celsius", legend="{{gpu}} {{sensor}}"),
    panel(0, "Power and limit", ['polyaccel_accelerator_power_watts{%s}' % G, ('polyaccel_accelerator_power_limit_watts{%s}' % G, "{{gpu}} limit")], unit="watt", legend="{{gpu}}"),
    panel(0, "Clocks", ['polyaccel_accelerator_clock_hertz{%s}' % G], unit="hertz", legend="{{gpu}} {{clock}}"),
    panel(0, "ECC errors", ['polyaccel_accelerator_ecc_errors_total{%s}' % G], legend="{{gpu}} {{type}} {{scope}}"),
    panel(0, "Remapped rows", ['polyaccel_accelerator_remapped_rows_total{%s}' % G, ('polyaccel_accelerator_row_remap_pending{%s}' % G, "{{gpu}} pending")], legend="{{gpu}} {{cause}}"),
    panel(0, "PCIe replays per second", ['rate(polyaccel_accelerator_pcie_replays_total{%s}[$__rate_interval])' % G], unit="ops", legend="{{gpu}}"),
    panel(0, "Error events", ['polyaccel_accelerator_events_total{%s}' % G], legend="{{gpu}} {{kind}}"),
    panel(0, "Sample age", ['polyaccel_accelerator_sample_age_seconds{%s}' % G], unit="s", legend="{{gpu}}"),
    panel(0, "MIG instances", ['polyaccel_accelerator_mig_instance_memory_bytes{%s}' % G], unit="bytes", kind="table"),
    panel(0, "Device", ['polyaccel_accelerator_info{%s}' % G], kind="table"),
])

for name, d in (("polyaccel-fleet.json", fleet), ("polyaccel-node.json", node), ("polyaccel-gpu.json", gpu)):
    (HERE / name).write_text(json.dumps(d, indent=2) + "\n")

subprocess.run([sys.executable, str(HERE.parent / "kubernetes/overlays/monitoring/sync.py")],
               check=True)
