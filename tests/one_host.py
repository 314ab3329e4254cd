"""A simulated platform of one host, written for a test: its network config (the loopback a message within the
host crosses) and the host's speed, cores and properties (scaledl.sim.platform names them)."""

from __future__ import annotations


def one_host_platform(speed: float, cores: int, props: dict[str, str], config: dict[str, str]) -> str:
    """The platform file's text: one zone `box` with one host `box`, CM02's flow model and `config` beside it."""
    settings = {"network/model": "CM02", **config}
    config_lines = "\n".join(f'    <prop id="{k}" value="{v}"/>' for k, v in settings.items())
    prop_lines = "\n".join(f'      <prop id="{k}" value="{v}"/>' for k, v in props.items())
    return f"""<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <config>
{config_lines}
  </config>
  <zone id="box" routing="Full">
    <host id="box" speed="{speed:g}f" core="{cores}">
{prop_lines}
    </host>
  </zone>
</platform>
"""
