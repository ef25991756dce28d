"""One published case's prediction inputs (analysis.answers.published_check), read from its
typed fields alone (plan.published_cases: traffic, overlap, wire and compute precision,
baseline, intra-node link, the one-device figure it borrows), with every assumption taken
in words. The case's free text (framework, precision, relative_to, notes, assumptions) is
repeated in those words at most, never read to decide.

- compute: the borrowed profile's shape (published_model.choose_profile), scaled to the
  case's one-device step (per-device batch / one-device img/s): its own img/s, or the one
  of the case its single_device.borrowed_from names; else not predicted;
- gradient bytes: the model's parameters x 4 (fp32, as the backward pass makes them), sent
  at the bytes of its wire_precision (a wire ratio, laws.engine.RemedyEffect);
- link: between nodes, the inter-node nominal rate as the bandwidth of the declared
  traffic (one NIC per node carries the inter-node hop) with the latency of its kind (RDMA
  or TCP, published_model.ALPHA_S); inside one node, the intra-node link's nominal rate
  and the latency of its kind. A one-node baseline (baseline: one_node) is a node of
  devices_per_node over that intra-node link.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpscale.analysis.answers.published_model import (
    ALPHA_S,
    FP32_BYTES,
    LINK_KIND_WORDS,
    PARAMETERS,
    PROFILE_PRECISION,
    Profile,
    Setup,
)
from dpscale.plan import ring
from dpscale.plan.published_cases import AFTER_BACKWARD, DELAYED, ONE_NODE, case_fields
from dpscale.plan.traffic import ParameterServers, RingAllReduce, Traffic

AFTER_BACKWARD_WORDS = (
    "all gradients all-reduced after the backward pass (overlap: after_backward): one bucket "
    "of all the bytes, ready at the backward's end"
)
DELAYED_WORDS = (
    "double buffering = the delayed all-reduce behind the next step: "
    "step = max(compute, sum of the buckets' all-reduces)"
)
# parameter servers inside one node that are not its devices: server processes on the host
HOST_SERVERS = (
    "parameter servers in one node, off its devices (a CPU parameter server): every device's "
    "gradient goes to the host over PCIe, not a ring all-reduce of buckets; the mechanism "
    "does not apply"
)
NO_THROUGHPUT = (
    "no one-device throughput: none published for this GPU and model, and the case names "
    "none to borrow (single_device.borrowed_from)"
)


def on_one_node(declared: Traffic) -> Traffic | None:
    """What one node's devices send each other: parameter servers that take each node's sum
    leave the node's own sum to a ring of its devices (nothing crosses a NIC); servers that
    are neither per node nor on the devices are processes on the host, over a path the check
    has no rate for (None); every other traffic as declared."""
    if isinstance(declared, ParameterServers):
        if declared.per_node:
            return RingAllReduce()
        if not declared.on_workers:
            return None
    return declared


def _over(declared: Traffic, world: int) -> tuple[str, str]:
    """(what carries the buckets, what one latency is paid for), in words."""
    if isinstance(declared, RingAllReduce):
        return f"ring over {world} devices", "ring step"
    if isinstance(declared, ParameterServers):
        return "parameter servers", "push or pull"
    return declared.words(), "hop"


def setup_for(
    case: Mapping[str, Any],
    by_id: Mapping[str, Mapping[str, Any]],
    profile: Profile,
) -> Setup | str:
    """The case's inputs, or the reason it is not predicted; ``profile`` is the timeline it
    borrows (published_model.choose_profile)."""
    fields = case_fields(case)
    shape, shape_model = profile.words, profile.model
    nodes, per_node = int(case["nodes"]), int(case["devices_per_node"])
    inside = on_one_node(fields.traffic)
    if nodes == 1 and inside is None:
        return HOST_SERVERS
    model = case["model"]
    if model not in PARAMETERS:
        return f"no parameter count for model {model}"
    assumptions = [shape + ", scaled to this case's one-device step"]
    single = case.get("single_device") or {}
    if single.get("img_s"):
        img_s = float(single["img_s"])
        if single.get("published_in_same_source"):
            source = f"one-device {img_s:g} img/s published in the same source; {shape}"
        else:
            source = f"one-device {img_s:g} img/s borrowed ({single.get('from', '')}); {shape}"
    elif fields.borrowed_from is not None:
        lender = by_id[fields.borrowed_from]
        img_s = float(lender["single_device"]["img_s"])
        source = (
            f"one-device {img_s:g} img/s borrowed from case {lender['id']} ({lender['gpu']}, "
            f"{str(lender.get('framework', '')).split(',')[0]}, batch "
            f"{lender['per_device_batch']}), as this case's single_device.borrowed_from "
            f"names; {shape}"
        )
    else:
        return NO_THROUGHPUT
    if model != shape_model:
        assumptions.append(
            f"{model} takes {shape_model}'s compute shape (bucket ready and byte shares) with "
            "its own gradient bytes"
        )
    if profile.precision and profile.precision != PROFILE_PRECISION[fields.compute_precision]:
        assumptions.append(
            f"the case computes in {fields.compute_precision}; the profile timed "
            f"{profile.precision}"
        )
    if single.get("img_s") is None or not single.get("published_in_same_source"):
        assumptions.append(f"one-device throughput borrowed: {img_s:g} img/s (other run)")
    batch = int(case["per_device_batch"])
    lender_batch = by_id.get(fields.borrowed_from or "", {}).get("per_device_batch")
    if single.get("img_s") is None and lender_batch not in (None, batch):
        assumptions.append(
            f"the borrowed img/s taken at this case's batch {batch} (measured at {lender_batch})"
        )
    hidden = fields.overlap == DELAYED
    per_value = fields.wire_bytes
    gradient = PARAMETERS[model] * FP32_BYTES  # the backward's; the wire ratio divides it
    assumptions.append(
        f"gradient bytes {PARAMETERS[model]:,} parameters x {per_value} "
        f"({fields.wire_precision} all-reduce) = {PARAMETERS[model] * per_value / 1e6:.1f} MB"
    )
    if fields.compute_precision == "amp":
        assumptions.append(
            f"AMP: gradients taken as {fields.wire_precision} on the wire (the case's "
            "wire_precision)"
        )
    if hidden:
        assumptions.append(DELAYED_WORDS)
    world = nodes * per_node
    if nodes > 1:
        declared = fields.traffic
        inter = case["inter_node_link"]
        rdma = inter.get("rdma") is True
        link_kind = "rdma" if rdma else "tcp"
        beta = float(inter["nominal_gbit_s"]) * 1e9 / 8
        alpha = ALPHA_S[link_kind]
        link = inter["name"]
        over, step = _over(declared, world)
        assumptions.append(
            f"{over} at the nominal {inter['nominal_gbit_s']:g} Gbit/s "
            f"(one NIC per node carries the inter-node hop), alpha {alpha * 1e6:g} us per "
            f"{step} ({'RDMA' if rdma else 'TCP, RDMA not stated or absent'})"
        )
    elif fields.intra.kind in ALPHA_S and fields.intra.bytes_s is not None:
        declared = inside or fields.traffic  # inside: never None here (refused above)
        beta, link_kind = fields.intra.bytes_s, fields.intra.kind
        alpha = ALPHA_S[link_kind]
        link = f"{LINK_KIND_WORDS[link_kind]} (one node)"
        over, _ = _over(declared, world)
        assumptions.append(f"{over}, {fields.intra.words}, alpha {alpha * 1e6:g} us")
    else:
        return (
            f"one node, and no nominal rate and latency assumed for its link "
            f"({fields.intra.kind}: {fields.intra.name})"
        )
    setup = Setup(batch, img_s, gradient, nodes, per_node, beta, alpha, hidden, link, source)
    setup.traffic, setup.link_kind, setup.phases = declared, link_kind, fields.phases
    setup.wire_ratio = FP32_BYTES / per_value
    setup.own_img_s = bool(single.get("img_s") and single.get("published_in_same_source"))
    if nodes > 1 and isinstance(declared, ParameterServers):
        assumptions.append(_servers_words(declared, nodes, per_node))
    if fields.overlap == AFTER_BACKWARD:
        setup.after_backward = True
        assumptions.append(AFTER_BACKWARD_WORDS)
    if fields.baseline == ONE_NODE:
        intra = fields.intra
        if intra.kind not in ALPHA_S or intra.bytes_s is None:
            return "baseline is one node, and no nominal rate is assumed for its intra-node link"
        if inside is None:
            return "baseline is one node, and " + HOST_SERVERS
        setup.base_world, setup.base_traffic = per_node, inside
        setup.base_beta, setup.base_alpha = intra.bytes_s, ALPHA_S[intra.kind]
        assumptions.append(f"baseline one node of {setup.base_world} on {intra.words}")
    setup.assumptions = assumptions
    return setup


def _servers_words(declared: ParameterServers, nodes: int, per_node: int) -> str:
    factor = declared.wire_factor(nodes, per_node)
    if declared.per_node and declared.servers is not None and not declared.on_workers:
        how = (
            f"{declared.servers} shards on {declared.servers} of the {nodes} worker machines, "
            "each machine summing its GPUs' gradients first"
        )
    else:
        how = declared.words()
    return (
        f"parameter servers, not a ring: {how}; the busiest NIC moves {factor:.2f} x each "
        f"bucket's bytes each way at the nominal rate (a ring over the {nodes} nodes: "
        f"{ring.ring_factor(nodes):.2f} x)"
    )
