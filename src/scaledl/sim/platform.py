"""Simulated platforms: SimGrid platform files, plus what scaledl reads from their hosts' properties.

A platform is a SimGrid XML file (version 4.1): hosts with a speed (FLOP/s),
links with a bandwidth and a latency, routes. SimGrid times every message on
it. scaledl adds to each host (a `<prop>` of the host, or of a `<cluster>` for
all its hosts) what its cost model needs:

    role           device (a rank runs here), master (a dedicated master's CPU), or cpu
                   (a CPU no rank runs on, only its devices' host work, messages and copies); default device
    slots          ranks one host takes (default 1): a laptop's one host takes many
    efficiency     the fraction of peak FLOP/s that matrix products and convolutions reach
    memory_bw      bytes/s of the device's memory
    op_overhead    seconds per operation (kernel launch, framework dispatch)
    cpu_host       the CPU host (socket) the device hangs off: its host buffers' memory, where its
                   messages start and end and its host work runs; host↔device copies cross the
                   route to it (PCIe); absent on a device that is its own host (a CPU, a KNL node)
    node           the node's name (ranks of one node share memory); default the host's name
    noise_cv, noise_node_cv, noise_detour_rate, noise_detour
                   the timing noise of the host's executions (scaledl.sim.noise): a spread per execution, a
                   speed factor per host and run, detours per second of execution and each one's length
                   (SimGrid time units: 1ms); default none
    gemm_half_rows, gemm_half_columns, gemm_half_depth
                   optional, all three: the dimensions of a matrix product (a convolution's: batch × output
                   pixels, output channels, input channels × kernel area) at which its efficiency halves
                   (scaledl.sim.roofline.Device.gemm_efficiency; `scaledl calibrate` fits them)
    conv_overhead  optional: a convolution's cost per call where it is not op_overhead (SimGrid time units)
    message_segments
                   optional: a message within the host (its loopback) by its size, UP_TO_BYTES:ALPHA:BETA;...
                   the last up to inf: α + β·n in the segment holding n (`scaledl calibrate` fits them on the cold
                   ping-pong: an eager, a cache-resident and a memory-bound regime), instead of the loopback's line
    waiting        what a rank blocked in MPI does: blocks (default: it takes no core) or polls (it keeps a
                   core busy while it waits, as MPICH's progress loop does: with more ranks than cores the
                   computing ones then get less than a core each)
    binding        what of the host a rank runs on: none (default: its helper threads' work and its copies run
                   on any free core beside its compute) or core (each rank is bound to one core: its helpers'
                   work and its shared-memory copies take turns with its compute, as the threads of a process
                   pinned to one core do)
    core_factors   optional, with binding core: F0,F1,... the compute time of a rank bound to each core, as a
                   multiple of the host's price, in the order the launcher binds ranks (the host's i-th rank on
                   core i modulo their count): the cores of one machine need not run at one speed (a virtual
                   machine's vCPUs share their physical cores with others); `scaledl calibrate --per-core`
                   times the step on each core

The shipped platforms (scaledl/sim/platforms/*.xml) state their sources
in their header comments. Ranks are placed in the order of the file's device
hosts, `slots` per host; a dedicated master goes to the first master host (or
the first device host). More ranks than slots is refused in one line.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from importlib import resources
from pathlib import Path

from scaledl.errors import UserError
from scaledl.sim.noise import Noise
from scaledl.sim.roofline import Device

SHIPPED = resources.files("scaledl.sim") / "platforms"
WAITING = ("blocks", "polls")  # what a rank blocked in MPI does with its core
BINDINGS = ("none", "core")  # what of its host a rank runs on


@dataclass(frozen=True)
class HostInfo:
    name: str
    speed: float  # FLOP/s, as SimGrid has it
    role: str
    slots: int
    efficiency: float
    memory_bw: float
    op_overhead: float
    cpu_host: str | None
    node: str
    noise: Noise = Noise()
    polls: bool = False  # a rank waiting here keeps a core busy (waiting: polls)
    bound: bool = False  # a rank here runs on one core, its helpers' work and copies in turn (binding: core)
    core_factors: tuple[float, ...] = ()  # bound: each core's compute time over the host's price, in binding order
    gemm_halves: tuple[float, float, float] | None = None  # (gemm_half_rows, _columns, _depth): Device
    conv_overhead: float | None = None  # per convolution, where it is not op_overhead
    # a message within this host by its size: (up to bytes, α s, β s/B) per segment, the last up to infinity
    message_segments: tuple[tuple[float, float, float], ...] | None = None

    def device(self) -> Device:
        return Device(
            self.name,
            self.speed,
            self.efficiency,
            self.memory_bw,
            self.op_overhead,
            self.cpu_host is not None,
            self.gemm_halves,
            self.conv_overhead,
        )


@dataclass(frozen=True)
class Platform:
    name: str
    path: Path
    hosts: dict[str, HostInfo]  # in file order
    loopback: tuple[float, float] | None = None  # network/loopback-lat (s) and -bw (B/s), where the file sets them

    def devices(self) -> list[HostInfo]:
        return [h for h in self.hosts.values() if h.role == "device"]

    def capacity(self) -> int:
        return sum(h.slots for h in self.devices())

    def place(self, ranks: int, dedicated_master: bool) -> list[HostInfo]:
        """The host of each rank: a dedicated master (rank 0) on the master host, the rest on device slots."""
        masters = [h for h in self.hosts.values() if h.role == "master"]
        placed = []
        if dedicated_master and masters:
            placed.append(masters[0])
        slots = [h for h in self.devices() for _ in range(h.slots)]
        need = ranks - len(placed)
        if need > len(slots):
            raise UserError(
                f"platform {self.name} has {len(slots)} rank slot(s) on its device hosts, but this run needs "
                f"{ranks} rank(s){' (a master and the workers)' if dedicated_master else ''}; use fewer workers "
                "or a larger platform"
            )
        return placed + slots[:need]


def shipped() -> list[str]:
    return sorted(p.name.removesuffix(".xml") for p in SHIPPED.iterdir() if p.name.endswith(".xml"))


def resolve(name_or_path: str | Path) -> Path:
    """A shipped platform's name, or a platform file's path."""
    path = Path(name_or_path)
    if path.suffix == ".xml" or path.exists():
        if not path.is_file():
            raise UserError(
                f"platform file {path} does not exist; give a platform file or one of {', '.join(shipped())}"
            )
        return path
    candidate = SHIPPED / f"{name_or_path}.xml"
    if not candidate.is_file():
        raise UserError(
            f"unknown platform {str(name_or_path)!r}; one of {', '.join(shipped())}, or a platform file's path"
        )
    return Path(str(candidate))


def _number(text: str, what: str) -> float:
    """SimGrid's units: 1Gf, 10GBps, 1.5us, or a plain number."""
    units = {
        "f": 1, "kf": 1e3, "Mf": 1e6, "Gf": 1e9, "Tf": 1e12, "Pf": 1e15,
        "Bps": 1, "kBps": 1e3, "KBps": 1e3, "MBps": 1e6, "GBps": 1e9, "TBps": 1e12,
        "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9,
    }  # fmt: skip
    text = text.strip()
    for suffix in sorted(units, key=len, reverse=True):
        if text.endswith(suffix) and text[: -len(suffix)].strip():
            try:
                return float(text[: -len(suffix)]) * units[suffix]
            except ValueError:
                break
    try:
        return float(text)
    except ValueError:
        raise UserError(f"platform: {what} {text!r} is not a number (SimGrid units such as 1Gf, 10GBps, 1us)") from None


def _props(element) -> dict[str, str]:
    return {p.get("id"): p.get("value") for p in element.findall("prop")}


def _host(name: str, speed: str, props: dict[str, str], path: Path) -> HostInfo:
    def get(key: str, default=None):
        value = props.get(key, default)
        if value is None:
            raise UserError(f"platform {path}: host {name} lacks the property {key!r} (see scaledl.sim.platform)")
        return value

    role = get("role", "device")
    if role not in ("device", "master", "cpu"):
        raise UserError(f"platform {path}: host {name} has role {role!r}; one of device, master, cpu")
    waiting = get("waiting", "blocks")
    if waiting not in WAITING:
        raise UserError(f"platform {path}: host {name} has waiting {waiting!r}; one of {', '.join(WAITING)}")
    binding = get("binding", "none")
    if binding not in BINDINGS:
        raise UserError(f"platform {path}: host {name} has binding {binding!r}; one of {', '.join(BINDINGS)}")
    return HostInfo(
        name=name,
        speed=_number(speed.split(",")[0], f"host {name} speed"),
        role=role,
        slots=int(get("slots", "1")),
        efficiency=float(get("efficiency", "1")),
        memory_bw=_number(get("memory_bw"), f"host {name} memory_bw"),
        op_overhead=_number(get("op_overhead", "0"), f"host {name} op_overhead"),
        cpu_host=props.get("cpu_host"),
        node=props.get("node", name),
        noise=_noise(name, props, path),
        polls=waiting == "polls",
        bound=binding == "core",
        core_factors=_core_factors(name, props.get("core_factors"), binding, path),
        gemm_halves=_gemm_halves(name, props, path),
        conv_overhead=_conv_overhead(name, props),
        message_segments=_segments(name, props.get("message_segments"), path),
    )


def _core_factors(name: str, text: str | None, binding: str, path: Path) -> tuple[float, ...]:
    """core_factors: positive numbers, one per core, on a host whose ranks are bound to cores."""
    if text is None:
        return ()
    try:
        factors = tuple(float(x) for x in text.split(","))
    except ValueError:
        factors = ()
    if not factors or min(factors) <= 0:
        raise UserError(f"platform {path}: host {name} has core_factors {text!r}; positive numbers F0,F1,... needed")
    if binding != "core":
        raise UserError(f"platform {path}: host {name} has core_factors but binding {binding!r}: set binding core")
    return factors


def _segments(name: str, text: str | None, path: Path) -> tuple[tuple[float, float, float], ...] | None:
    """`message_segments`: UP_TO_BYTES:ALPHA:BETA;... in rising order, the last up to `inf`."""
    if text is None:
        return None
    try:
        segments = tuple(tuple(float(x) for x in part.split(":")) for part in text.split(";") if part.strip())
        ok = all(len(s) == 3 and s[1] >= 0 and s[2] >= 0 for s in segments) and segments[-1][0] == float("inf")
        ok = ok and all(a[0] < b[0] for a, b in zip(segments, segments[1:]))
    except (ValueError, IndexError):
        ok = False
    if not ok:
        raise UserError(
            f"platform {path}: host {name}'s message_segments {text!r}: expected UP_TO_BYTES:ALPHA:BETA;... "
            "in rising order, the last up to inf, α and β 0 or more"
        )
    return segments


def _conv_overhead(name: str, props: dict[str, str]) -> float | None:
    found = props.get("conv_overhead")
    return None if found is None else _number(found, f"host {name} conv_overhead")


GEMM_HALVES = ("gemm_half_rows", "gemm_half_columns", "gemm_half_depth")


def _gemm_halves(name: str, props: dict[str, str], path: Path) -> tuple[float, float, float] | None:
    """The three dimensions at which a matrix product's efficiency halves (all or none of them)."""
    given = [props.get(key) for key in GEMM_HALVES]
    if not any(given):
        return None
    try:
        halves = tuple(float(value) for value in given)
    except (TypeError, ValueError):
        raise UserError(f"platform {path}: host {name} states {', '.join(GEMM_HALVES)}: all three, numbers") from None
    if min(halves) < 0:
        raise UserError(f"platform {path}: host {name}'s {', '.join(GEMM_HALVES)} must be 0 or more")
    return halves


def _noise(name: str, props: dict[str, str], path: Path) -> Noise:
    if "noise_spike" in props or "noise_spike_rate" in props:
        raise UserError(
            f"platform {path}: host {name}: noise_spike and noise_spike_rate stretched an execution in proportion to "
            "its length and are gone; state detours in absolute time instead: noise_detour_rate (per second of "
            "execution) and noise_detour (each one's length, such as 1ms)"
        )
    try:
        return Noise(
            float(props.get("noise_cv", "0")),
            float(props.get("noise_node_cv", "0")),
            float(props.get("noise_detour_rate", "0")),
            _number(props.get("noise_detour", "0"), f"host {name} noise_detour"),
        )
    except ValueError as error:
        raise UserError(f"platform {path}: host {name}: a noise_* property is not a number ({error})") from None
    except UserError as error:
        raise UserError(f"platform {path}: host {name}: {error}") from None


def _cluster_names(cluster) -> list[str]:
    names = []
    for part in cluster.get("radical", "").split(","):
        lo, _, hi = part.partition("-")
        names += [
            f"{cluster.get('prefix', '')}{i}{cluster.get('suffix', '')}" for i in range(int(lo), int(hi or lo) + 1)
        ]
    return names


def load(name_or_path: str | Path) -> Platform:
    """The platform's hosts and their properties (SimGrid itself loads the file again: Simulation)."""
    path = resolve(name_or_path)
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as error:
        raise UserError(f"platform file {path} is not valid XML ({error})") from None
    if root.tag != "platform":
        raise UserError(f"platform file {path}: the root element is <{root.tag}>, not <platform>")
    hosts: dict[str, HostInfo] = {}
    for element in root.iter():
        if element.tag == "host":
            hosts[element.get("id")] = _host(element.get("id"), element.get("speed", "0"), _props(element), path)
        elif element.tag == "cluster":
            props = _props(element)
            for name in _cluster_names(element):
                hosts[name] = _host(name, element.get("speed", "0"), props, path)
    for host in hosts.values():
        if host.cpu_host is not None and host.cpu_host not in hosts:
            raise UserError(f"platform {path}: host {host.name} names cpu_host {host.cpu_host}, which is not a host")
    if not any(h.role == "device" for h in hosts.values()):
        raise UserError(f"platform {path} has no host with role device: no rank could run on it")
    config = {p.get("id"): p.get("value") for c in root.iter("config") for p in c.findall("prop")}
    loopback = None
    if "network/loopback-lat" in config and "network/loopback-bw" in config:
        loopback = (
            _number(config["network/loopback-lat"], "loopback-lat"),
            _number(config["network/loopback-bw"], "bw"),
        )
    if loopback is None and any(h.message_segments for h in hosts.values()):
        raise UserError(f"platform {path}: message_segments need network/loopback-lat and -bw in its <config>")
    return Platform(path.stem, path, hosts, loopback)


# ---- scaled copies: a regime map's grid, a sensitivity sweep's constants ----------------------------------------


def _times(element, attribute: str, factor: float, unit: str, cap: float | None = None) -> float | None:
    """Multiply a numeric attribute (SimGrid units) in place, at most `cap`; its value before, None if absent."""
    text = element.get(attribute)
    if text is None:
        return None
    value = _number(text.split(",")[0], attribute)
    element.set(attribute, f"{min(value * factor, cap) if cap is not None else value * factor:.9g}{unit}")
    return value


def _host_elements(root) -> list:
    return [element for element in root.iter() if element.tag in ("host", "cluster")]


def _scale_property(
    root, factor: float, key: str, unit: str = "", default: float | None = None, cap: float | None = None
) -> list[float]:
    """Every host's (and cluster's) property `key` × factor, a host without it at its `default` (written in);
    the values before."""
    before = []
    for element in _host_elements(root):
        prop = next((p for p in element.findall("prop") if p.get("id") == key), None)
        if prop is None and default is None:
            continue
        if prop is None:
            prop = ET.SubElement(element, "prop", id=key, value=f"{default:.9g}")
        before.append(_times(prop, "value", factor, unit, cap))
    return before


def _noise_level(root, factor: float) -> list[float]:
    """Every host's timing noise × factor, as scaledl.sim.noise.Noise.scaled has it: its two spreads and its
    detours' rate; the per-execution cvs before."""
    _scale_property(root, factor, "noise_node_cv")
    _scale_property(root, factor, "noise_detour_rate")
    return _scale_property(root, factor, "noise_cv")


def pcie_links(root) -> set[str]:
    """The links of the routes between a device and its `cpu_host`: the host↔device copies' PCIe."""
    cpu_of = {}
    for element in root.iter("host"):
        cpu = _props(element).get("cpu_host")
        if cpu:
            cpu_of[element.get("id")] = cpu
    pairs = {frozenset(pair) for pair in cpu_of.items()}
    return {
        ctn.get("id")
        for route in root.iter("route")
        if frozenset((route.get("src"), route.get("dst"))) in pairs
        for ctn in route.iter("link_ctn")
    }


def _link_bandwidth(root, factor: float, pcie: bool) -> list[float]:
    """The PCIe links' bandwidth × factor (pcie), or every other bandwidth's: the other links, a cluster's
    links, backbone and loopback, the loopback of hosts that are their own peers; the values before."""
    chosen = pcie_links(root)
    before = [
        _times(link, "bandwidth", factor, "Bps") for link in root.iter("link") if (link.get("id") in chosen) == pcie
    ]
    if not pcie:
        before += [_times(bone, "bandwidth", factor, "Bps") for bone in root.iter("backbone")]
        for cluster in root.iter("cluster"):
            before += [_times(cluster, attribute, factor, "Bps") for attribute in ("bw", "bb_bw", "loopback_bw")]
        for prop in root.iter("prop"):
            if prop.get("id") == "network/loopback-bw":
                before.append(_times(prop, "value", factor, ""))
    return [value for value in before if value is not None]


@dataclass(frozen=True)
class Constant:
    """A platform constant a sensitivity sweep varies: what it is, its unit, and how a factor changes it."""

    what: str
    unit: str
    vary: Callable  # (the platform's XML root, factor) -> the values it had (SI units), changed in place


# The constants that are assumptions or carry a validation error (each shipped platform's header says which),
# by name: scaledl sensitivity varies each alone.
CONSTANTS = {
    "efficiency": Constant(
        "every host's fraction of peak FLOP/s in matrix products and convolutions", "",
        partial(_scale_property, key="efficiency", default=1.0),
    ),
    "op_overhead": Constant(
        "every host's seconds per operation (kernel launch, framework dispatch)", "s",
        partial(_scale_property, key="op_overhead", unit="s"),
    ),
    "memory_bw": Constant(
        "every host's memory bandwidth", "B/s", partial(_scale_property, key="memory_bw", unit="Bps"),
    ),
    "pcie_bw": Constant(
        "the bandwidth of the links between a device and its cpu_host (PCIe)", "B/s",
        partial(_link_bandwidth, pcie=True),
    ),
    "network_bw": Constant(
        "every other link's bandwidth (the network, a cluster's links, the loopback)", "B/s",
        partial(_link_bandwidth, pcie=False),
    ),
    "noise": Constant("every host's timing noise: its two spreads and its detours' rate", "", _noise_level),
}  # fmt: skip


def _parse(path: Path):
    try:
        return ET.parse(path).getroot()
    except ET.ParseError as error:
        raise UserError(f"platform file {path} is not valid XML ({error})") from None


def _text(root) -> str:
    header = "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
    return header + ET.tostring(root, encoding="unicode") + "\n"


def varied(path: Path, constant: str, factor: float) -> tuple[str, list[float]]:
    """The platform file at `path` with one constant (a CONSTANTS name) `factor`× its value, as XML text (the
    header comment is not kept), and the values it had: none, or all 0, where the platform lacks it."""
    if constant not in CONSTANTS:
        raise UserError(f"unknown platform constant {constant!r}; one of {', '.join(CONSTANTS)}")
    root = _parse(path)
    before = CONSTANTS[constant].vary(root, factor)
    return _text(root), before


def scaled(path: Path, bandwidth: float, speed: float) -> str:
    """The platform file at `path` with every link (and loopback) `bandwidth`× as fast and every host's device
    `speed`× as fast (its FLOP rate and memory bandwidth multiplied, its per-operation overhead divided):
    the variants a regime map sweeps. Returned as XML text (the header comment is not kept)."""
    root = _parse(path)
    for pcie in (True, False):
        _link_bandwidth(root, bandwidth, pcie)
    for element in _host_elements(root):
        _times(element, "speed", speed, "f")
    _scale_property(root, speed, "memory_bw", "Bps")
    _scale_property(root, 1.0 / speed, "op_overhead", "s")
    return _text(root)
