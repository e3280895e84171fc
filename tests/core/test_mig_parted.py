"""mig-parted config files (core/documents/mig_parted.py): what a named config makes of a node's
GPUs, counted by hand from the rules."""

import pytest

from jupyter_gpupool.core.documents import mig_parted
from jupyter_gpupool.core.documents.yaml_reader import DocumentError

A100_80 = "NVIDIA-A100-SXM4-80GB"


def test_the_default_configs_cut_an_a100_80gb_as_the_gpu_operators_file_says():
    configs = mig_parted.DEFAULT_CONFIGS
    assert mig_parted.units(configs["all-disabled"], 8, A100_80) == {"whole": 8}
    assert mig_parted.units(configs["all-1g.10gb"], 8, A100_80) == {"1g.10gb": 56}
    assert mig_parted.units(configs["all-balanced"], 1, A100_80) == {
        "1g.10gb": 2,
        "2g.20gb": 1,
        "3g.40gb": 1,
    }


def test_a_config_filtered_to_other_cards_does_not_apply():
    configs = mig_parted.DEFAULT_CONFIGS
    assert mig_parted.units(configs["all-1g.5gb"], 8, A100_80) is None
    assert mig_parted.units(configs["all-1g.10gb"], 4, "NVIDIA-A10") is None
    # no filter: it applies to any card
    assert mig_parted.units(configs["all-disabled"], 4, "NVIDIA-A10") == {"whole": 4}


def test_rules_by_device_index_and_the_plus_spelling():
    configs = mig_parted.read_configs(
        """
version: v1
mig-configs:
  half:
    - devices: [0, 1]
      mig-enabled: true
      mig-devices: {"1g.10gb+me": 1, "3g.40gb": 2}
    - devices: [2, 3]
      mig-enabled: false
"""
    )
    layouts = mig_parted.gpu_layouts(configs["half"], 4, A100_80)
    assert layouts == ((("1g.10gb+me", 1), ("3g.40gb", 2)),) * 2 + (None, None)
    assert mig_parted.units(configs["half"], 4, A100_80) == {
        "1g.10gb.me": 2,
        "3g.40gb": 4,
        "whole": 2,
    }


@pytest.mark.parametrize(
    "rule, path",
    [
        ("{devices: some, mig-enabled: false}", "devices"),
        ("{devices: all, mig-enabled: yes please}", "mig-enabled"),
        ('{devices: all, mig-enabled: true, mig-devices: {"1g.10gb": -1}}', "mig-devices"),
    ],
)
def test_a_bad_rule_is_named(rule, path):
    with pytest.raises(DocumentError) as e:
        mig_parted.read_configs(f"mig-configs:\n  x:\n    - {rule}\n")
    assert [p.path for p in e.value.problems] == [f"mig-configs.x[0].{path}"]
