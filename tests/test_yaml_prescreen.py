"""A YAML file found by walking the tree is parsed only when its text may give a unit (yaml_file.may_give_units): a
Helm chart's Go template beside the recipes (NeMo RL's infra/helm/helmfile.yaml: `{{ if eq ... }}`) is not YAML, and
made a whole check exit 2. Named on the command line, or holding what offlint reads (a model section, MODEL_ARGS,
a launch command), it is still parsed, and an unreadable one is still an error. Fixtures of our own."""

from __future__ import annotations

import subprocess
import sys

from offlint.sources.yaml_file import may_give_units

HELM = """\
repositories:
  - name: nvidia
    url: https://helm.ngc.nvidia.com/nvidia
{{ if eq .Environment.Values.gpu_backend "device-plugin" }}
- name: nvidia-device-plugin
  namespace: nvidia
{{ end }}
"""

BROKEN_OVERRIDE = """\
model:
  tensor_model_parallel_size: 2
  {{ broken }}
"""


def _check(root, *paths: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "offlint", "check", *paths, "--no-cache", "--mcore-version", "0.20.0"],
                          cwd=root, capture_output=True, text=True)


def _left_alone_when_walked(root, path: str, text: str) -> None:
    """`path` (holding `text`) gives no error in a check of the tree, and is an invalid YAML error when named."""
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)
    done = _check(root, ".")
    assert done.returncode == 0, done.stdout + done.stderr
    named = _check(root, path)
    assert named.returncode == 2 and f"{path}: invalid YAML" in named.stdout + named.stderr


def test_a_template_that_gives_no_unit_is_left_alone_when_walked(tmp_path):
    _left_alone_when_walked(tmp_path, "infra/helmfile.yaml", HELM)


def test_a_broken_file_that_may_give_a_unit_is_still_an_error(tmp_path):
    (tmp_path / "override.yaml").write_text(BROKEN_OVERRIDE)
    done = _check(tmp_path, ".")
    assert done.returncode == 2 and "override.yaml: invalid YAML" in done.stdout + done.stderr


def test_what_may_give_a_unit():
    assert may_give_units("model:\n  x: 1\n") and may_give_units('"optimizer": {lr: 1}\n')
    assert may_give_units("base: &b\n  ddp:\n    x: 1\n")  # a key at any depth (an anchor merged at the top)
    assert may_give_units("MODEL_ARGS:\n  --num-layers: 2\n")
    assert may_give_units("script: torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 2\n")
    assert not may_give_units(HELM) and not may_give_units("train:\n  train_iters: 10\nmodel_name: llama\n")


MANIFEST_TEMPLATE = """\
{{ $config := .Values.trainingConfig }}

apiVersion: kubeflow.org/v1
kind: PyTorchJob
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: {{ .Values.image.nodes }}
      template:
        {{- if $config.ib }}
        metadata: {}
        {{- end }}
        spec:
          containers:
            - command: ["torchrun", "--nproc-per-node", "8", "pretrain_gpt.py"]
"""


def test_a_kubernetes_template_that_names_a_launch_is_left_alone_when_walked(tmp_path):
    """NeMo Framework Launcher's k8s_templates: Helm charts of PyTorchJobs whose container command runs torchrun,
    so the text pre-screen lets them through, and whose Go template actions (`{{ $config := ... }}`, `{{- if }}`)
    are no YAML: 4 files made a whole check exit 2. A file that does not parse is left alone when walked if it is a
    template (Go template actions) or a Kubernetes manifest; a broken override file is still an error (above)."""
    _left_alone_when_walked(tmp_path, "k8s/training.yaml", MANIFEST_TEMPLATE)

