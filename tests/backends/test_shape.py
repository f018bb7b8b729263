"""Fleet shapes: parsing, validation naming the field at fault, and the generated fleet (pure Python, no DB)."""

from __future__ import annotations

import math
import re

import pytest

from apps.backends.simulator import shape as shape_module
from apps.backends.simulator.shape import FleetShape, ShapeError, generate, parse_models

MIX = {"h100": 0.5, "a100": 0.3, "l40s": 0.2}
UUID = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def test_parse_models():
    assert parse_models("h100:0.5, a100:0.3,L40S:0.2") == MIX


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("h100", "code:fraction"),
        ("h100:half", "must be a number"),
        ("h100:0.5,h100:0.5", "listed twice"),
        ("", "at least one model"),
    ],
)
def test_parse_models_errors_name_the_field(text, message):
    with pytest.raises(ShapeError) as caught:
        parse_models(text)
    assert caught.value.field == "models"
    assert message in caught.value.message


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"nodes": 0}, "nodes", "positive"),
        ({"nodes": -3}, "nodes", "positive"),
        ({"nodes": "ten"}, "nodes", "positive"),
        ({"gpus_per_node": 0}, "gpus_per_node", "between 1 and 16"),
        ({"gpus_per_node": 17}, "gpus_per_node", "between 1 and 16"),
        ({"models": {"x100": 1.0}}, "models", "unknown model 'x100'; known: a100, h100, h200, l20, l40s, rtx4090"),
        ({"models": {"h100": 0.5, "a100": 0.4}}, "models", "sum to 1, not 0.9"),
        ({"models": {"h100": 1.5, "a100": -0.5}}, "models", "above 0 and at most 1"),
        ({"models": {"h100": math.nan}}, "models", "must be a number"),
        ({"models": {}}, "models", "map GPU model codes"),
        ({"seed": "abc"}, "seed", "whole number"),
        ({"nodes_per_rack": 0}, "nodes_per_rack", "between 1 and 256"),
        ({"hostname_label": "host"}, "hostname_label", "Hostname, hostname"),
    ],
)
def test_validation_names_the_field(changes, field, message):
    shape = FleetShape(**{"nodes": 4, "models": {"h100": 1.0}, **changes})
    with pytest.raises(ShapeError) as caught:
        shape.validate()
    assert caught.value.field == field
    assert message in caught.value.message
    assert isinstance(caught.value, ValueError)


def test_mix_within_tolerance_is_accepted():
    FleetShape(nodes=3, models={"h100": 1 / 3, "a100": 1 / 3, "l40s": 1 / 3}).validate()


def test_from_dict_rejects_unknown_fields_and_round_trips():
    with pytest.raises(ShapeError) as caught:
        FleetShape.from_dict({"nodes": 2, "gpu_per_node": 8})
    assert caught.value.field == "gpu_per_node"
    shape = FleetShape(nodes=5, models=MIX, seed=9, hostname_label="hostname")
    assert FleetShape.from_dict(shape.to_dict()) == shape
    assert FleetShape.from_dict({"nodes": 2, "models": "h100:1"}).models == {"h100": 1.0}


@pytest.mark.parametrize("nodes", [1, 7, 32, 33, 100, 1280])
def test_model_counts_follow_the_mix_by_largest_remainder(nodes):
    counts = FleetShape(nodes=nodes, models=MIX).model_counts()
    assert sum(counts.values()) == nodes
    for code, fraction in MIX.items():
        assert abs(counts[code] - fraction * nodes) < 1


def test_model_counts_for_the_demo_fleet():
    assert FleetShape(nodes=32, models=MIX).model_counts() == {"h100": 16, "a100": 10, "l40s": 6}


def test_generated_fleet():
    shape = FleetShape(10, 4, {"h100": 0.5, "l40s": 0.5}, seed=5, nodes_per_rack=2, racks_per_leaf=2)
    fleet = generate(shape)
    assert [n.name for n in fleet] == [f"gpu-{i:04d}" for i in range(1, 11)]
    assert [n.rack for n in fleet[:5]] == ["rack-01", "rack-01", "rack-02", "rack-02", "rack-03"]
    assert [n.leaf_switch for n in fleet[3:6]] == ["leaf-01", "leaf-02", "leaf-02"]
    assert sum(n.model == "h100" for n in fleet) == 5
    models = [n.model for n in fleet]
    assert models == sorted(models, key=models.index), "models come in contiguous blocks"
    for node in fleet:
        assert node.nvlink_domain == (node.name if node.model == "h100" else "")
        assert len(node.gpus) == 4 and node.cpu_cores > 0 and node.memory_mib > 0
        assert all(UUID.match(g.uuid) for g in node.gpus)
        assert len({g.pci_bus_id for g in node.gpus}) == 4
        assert node.gpus[0].pci_bus_id == "00000000:18:00.0"
    assert len({g.uuid for n in fleet for g in n.gpus}) == 40


def test_generation_is_deterministic_from_the_seed():
    one = FleetShape(nodes=20, models=MIX, seed=11)
    again = FleetShape(nodes=20, models=dict(MIX), seed=11)
    other = FleetShape(nodes=20, models=MIX, seed=12)
    shape_module._generate.cache_clear()
    first = generate(one)
    shape_module._generate.cache_clear()
    assert generate(again) == first
    assert generate(other)[0].gpus[0].uuid != first[0].gpus[0].uuid


def test_generates_the_full_size_fleet_and_caches_it():
    """Its speed is measured in bench/fleet_bench.py, not here: timed assertions flake on a loaded machine."""
    shape = FleetShape(nodes=1280, models=MIX, seed=2024).validate()
    shape_module._generate.cache_clear()
    fleet = generate(shape)
    assert len(fleet) == 1280 and sum(len(n.gpus) for n in fleet) == 10_240
    assert generate(shape) is fleet, "the fleet is cached per shape"
