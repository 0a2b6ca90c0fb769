"""deploy/kuberay/: the KubeRay example, parsed, holds what a sweep on it relies on.

No Kubernetes cluster runs these tests: they read the manifests as KubeRay and the kubelet would and check
the fields hwprof depends on (the `hwprof` resource on every worker and none on the head, a head that takes
no task but serves the dashboard and GCS, whole-node Guaranteed worker pods one per node, a RayJob whose
entrypoint hwprof's own parser accepts, the image the Dockerfile builds). Each check is also run on a copy
of the manifests broken in its way, and must fail there (test_each_check_fails_on_its_breakage).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import re
import shlex
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hwprof.cli.args import add_collect_args, build_parser

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy" / "kuberay"
API_VERSIONS = {"RayCluster": "ray.io/v1", "RayJob": "ray.io/v1", "PersistentVolumeClaim": "v1"}
HOSTNAME = "kubernetes.io/hostname"
GCS_PORT = 6379
DASHBOARD_PORT = 8265

Docs = list[dict[str, Any]]


def load_docs() -> Docs:
    docs: Docs = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    return docs


def of_kind(docs: Docs, kind: str) -> Docs:
    return [d for d in docs if d.get("kind") == kind]


def cluster_specs(docs: Docs) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every Ray cluster the manifests make: the RayClusters, and RayJobs that bring their own."""
    for doc in of_kind(docs, "RayCluster"):
        yield doc["metadata"]["name"], doc["spec"]
    for doc in of_kind(docs, "RayJob"):
        if "rayClusterSpec" in doc["spec"]:
            yield doc["metadata"]["name"], doc["spec"]["rayClusterSpec"]


def ray_resources(group: dict[str, Any]) -> dict[str, float]:
    """The custom resources a group's `ray start` declares. KubeRay passes rayStartParams' value to the shell
    as `--resources=VALUE`, so the value is shell-quoted JSON: shlex undoes the quoting as the shell does."""
    assert not (group.get("resources") and group.get("rayStartParams", {}).get("resources")), (
        "resources set both in rayStartParams and the group's resources (KubeRay rejects the cluster)"
    )
    if group.get("resources"):  # KubeRay's group-level map (values are strings)
        return {k: float(v) for k, v in group["resources"].items()}
    text = group.get("rayStartParams", {}).get("resources")
    if not text:
        return {}
    words = shlex.split(text)
    assert len(words) == 1, f"rayStartParams resources {text!r} is not one shell word"
    return {k: float(v) for k, v in json.loads(words[0]).items()}


def pod_spec(group: dict[str, Any]) -> dict[str, Any]:
    return group["template"]["spec"]


def ray_container(group: dict[str, Any]) -> dict[str, Any]:
    return pod_spec(group)["containers"][0]  # KubeRay's Ray container is the first


# ----------------------------------------------------------------------------- the checks


def check_kinds(docs: Docs) -> None:
    for doc in docs:
        kind = doc.get("kind")
        assert kind in API_VERSIONS, f"unexpected kind {kind!r}"
        assert doc.get("apiVersion") == API_VERSIONS[kind], f"{kind} apiVersion {doc.get('apiVersion')!r}"
    assert of_kind(docs, "RayCluster"), "no RayCluster"
    assert of_kind(docs, "RayJob"), "no RayJob"


def check_workers(docs: Docs) -> None:
    for name, spec in cluster_specs(docs):
        groups = spec.get("workerGroupSpecs") or []
        assert groups, f"{name}: no worker group"
        for group in groups:
            hwprof = ray_resources(group).get("hwprof")
            assert hwprof == 1, f"{name}/{group['groupName']}: declares hwprof {hwprof}, not exactly 1"
            assert "minReplicas" in group and "maxReplicas" in group, f"{name}: min/maxReplicas unset"


def check_head(docs: Docs) -> None:
    for name, spec in cluster_specs(docs):
        head = spec["headGroupSpec"]
        params = head.get("rayStartParams", {})
        assert params.get("num-cpus") == "0", f"{name}: head num-cpus {params.get('num-cpus')!r}, not '0'"
        assert "hwprof" not in ray_resources(head), f"{name}: the head declares hwprof"
        assert params.get("include-dashboard", "true") != "false", f"{name}: head dashboard off"
        ports = {p["containerPort"] for p in ray_container(head).get("ports", [])}
        gcs = int(params.get("port", GCS_PORT))
        dashboard = int(params.get("dashboard-port", DASHBOARD_PORT))
        assert gcs == GCS_PORT and gcs in ports, f"{name}: GCS port {gcs} not {GCS_PORT} in the head's ports"
        assert dashboard == DASHBOARD_PORT and dashboard in ports, (
            f"{name}: dashboard port {dashboard} not {DASHBOARD_PORT} in the head's ports"
        )


def check_guaranteed(docs: Docs) -> None:
    """Guaranteed QoS needs requests == limits for cpu and memory in every container of the pod (init
    containers too); the static CPU manager gives exclusive CPUs only for a whole number of them."""
    for name, spec in cluster_specs(docs):
        for group in spec["workerGroupSpecs"]:
            pod = pod_spec(group)
            for c in pod.get("initContainers", []) + pod["containers"]:
                res = c.get("resources", {})
                requests, limits = res.get("requests", {}), res.get("limits", {})
                for key in ("cpu", "memory"):
                    assert key in limits and str(requests.get(key)) == str(limits[key]), (
                        f"{name}/{c['name']}: {key} request {requests.get(key)} != limit {limits.get(key)}"
                    )
            cpu = str(ray_container(group)["resources"]["limits"]["cpu"])
            assert cpu.isdigit(), f"{name}: worker cpu {cpu} is not a whole number of CPUs"


def check_one_per_node(docs: Docs) -> None:
    for name, spec in cluster_specs(docs):
        for group in spec["workerGroupSpecs"]:
            pod = pod_spec(group)
            labels = {**group["template"].get("metadata", {}).get("labels", {}), "ray.io/group": group["groupName"]}
            terms = (
                pod.get("affinity", {})
                .get("podAntiAffinity", {})
                .get("requiredDuringSchedulingIgnoredDuringExecution", [])
            )
            apart = [
                t
                for t in terms
                if t.get("topologyKey") == HOSTNAME
                and t.get("labelSelector", {}).get("matchLabels")
                and t["labelSelector"]["matchLabels"].items() <= labels.items()
            ]
            assert apart, f"{name}/{group['groupName']}: no required pod anti-affinity on its own label per {HOSTNAME}"
            assert pod.get("nodeSelector"), f"{name}/{group['groupName']}: no nodeSelector for the measuring pool"


def parse_sweep(entrypoint: str) -> argparse.Namespace:
    """The entrypoint through hwprof's own parser (and its `--` part through collect's), as `hwprof` would."""
    argv = shlex.split(entrypoint)
    assert argv[:2] == ["hwprof", "sweep"], f"entrypoint {entrypoint!r} is not `hwprof sweep ...`"
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = build_parser().parse_args(argv[1:])
            collect = argparse.ArgumentParser(prog="hwprof collect")
            add_collect_args(collect)
            collect.parse_args(args.collect_args)
    except SystemExit:
        raise AssertionError(
            f"hwprof's parser refuses the entrypoint: {err.getvalue().strip().splitlines()[-1]}"
        ) from None
    return args


def check_job(docs: Docs) -> None:
    clusters = {d["metadata"]["name"]: d["spec"] for d in of_kind(docs, "RayCluster")}
    for job in of_kind(docs, "RayJob"):
        name, spec = job["metadata"]["name"], job["spec"]
        cluster = spec.get("rayClusterSpec") or clusters.get(spec.get("clusterSelector", {}).get("ray.io/cluster"))
        assert cluster, f"{name}: clusterSelector names no RayCluster of deploy/kuberay"
        args = parse_sweep(spec["entrypoint"])
        assert args.ray == "auto", f"{name}: --ray {args.ray!r}, not auto (the cluster the job runs in)"
        limits = [int(ray_container(g)["resources"]["limits"]["cpu"]) for g in cluster["workerGroupSpecs"]]
        assert all(t <= min(limits) for t in args.threads), f"{name}: --threads {args.threads} > CPU limit {limits}"
        head = cluster["headGroupSpec"]
        claims = {v["name"] for v in pod_spec(head).get("volumes", []) if "persistentVolumeClaim" in v}
        kept = [m["mountPath"] for m in ray_container(head).get("volumeMounts", []) if m["name"] in claims]
        assert any(Path(args.out).is_relative_to(m) for m in kept), f"{name}: --out {args.out} is on no volume"


def dockerfile_tag() -> str:
    text = (DEPLOY / "Dockerfile").read_text()
    match = re.search(r"docker build .*-t (\S+)", text)
    assert match, "the Dockerfile names no `docker build ... -t TAG`"
    assert re.search(r"^FROM python:3\.11", text, re.MULTILINE), "the Dockerfile is not FROM python:3.11"
    return match.group(1)


def check_images(docs: Docs) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    tag = dockerfile_tag()
    assert tag == f"hwprof:{project['version']}", f"Dockerfile tag {tag} is not hwprof's version"
    ray_pin = re.search(r"^ray==(\S+)", (ROOT / "constraints-common.txt").read_text(), re.MULTILINE)
    assert ray_pin
    for name, spec in cluster_specs(docs):
        assert spec.get("rayVersion") == ray_pin.group(1), f"{name}: rayVersion {spec.get('rayVersion')}"
        groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
        images = {c["image"] for g in groups for c in pod_spec(g)["containers"]}
        assert images == {tag}, f"{name}: images {sorted(images)}, not the Dockerfile's {tag}"


CHECKS = (check_kinds, check_workers, check_head, check_guaranteed, check_one_per_node, check_job, check_images)


def check_all(docs: Docs) -> None:
    for check in CHECKS:
        check(docs)


def test_the_manifests_hold_what_hwprof_relies_on() -> None:
    check_all(load_docs())


# ----------------------------------------------------------------------------- each check can fail


def _cluster(docs: Docs) -> dict[str, Any]:
    return of_kind(docs, "RayCluster")[0]["spec"]


def _worker(docs: Docs) -> dict[str, Any]:
    return _cluster(docs)["workerGroupSpecs"][0]


def _worker_pod(docs: Docs) -> dict[str, Any]:
    return pod_spec(_worker(docs))


def _head(docs: Docs) -> dict[str, Any]:
    return _cluster(docs)["headGroupSpec"]


def _job(docs: Docs) -> dict[str, Any]:
    return of_kind(docs, "RayJob")[0]["spec"]


def _set(path: Callable[[Docs], dict[str, Any]], key: str, value: Any) -> Callable[[Docs], None]:
    return lambda docs: path(docs).__setitem__(key, value)


def _entrypoint(old: str, new: str) -> Callable[[Docs], None]:
    return lambda docs: _job(docs).__setitem__("entrypoint", _job(docs)["entrypoint"].replace(old, new))


BREAKAGES: dict[str, tuple[Callable[[Docs], None], str]] = {
    "old apiVersion": (
        lambda d: of_kind(d, "RayCluster")[0].__setitem__("apiVersion", "ray.io/v1alpha1"),
        "apiVersion",
    ),
    "worker hwprof 2": (_set(lambda d: _worker(d)["rayStartParams"], "resources", '"{\\"hwprof\\": 2}"'), "hwprof 2"),
    "worker no hwprof": (_set(_worker, "rayStartParams", {}), "hwprof None"),
    "resources twice": (_set(_worker, "resources", {"hwprof": "1"}), "both in rayStartParams"),
    "head hwprof": (_set(lambda d: _head(d)["rayStartParams"], "resources", '"{\\"hwprof\\": 1}"'), "head declares"),
    "head cpus": (_set(lambda d: _head(d)["rayStartParams"], "num-cpus", "1"), "num-cpus"),
    "dashboard off": (_set(lambda d: _head(d)["rayStartParams"], "include-dashboard", "false"), "dashboard off"),
    "no dashboard port": (lambda d: ray_container(_head(d))["ports"].pop(1), "dashboard port"),
    "gcs elsewhere": (_set(lambda d: _head(d)["rayStartParams"], "port", "6380"), "GCS port"),
    "cpu burstable": (_set(lambda d: ray_container(_worker(d))["resources"]["requests"], "cpu", "8"), "cpu request"),
    "no memory limit": (lambda d: ray_container(_worker(d))["resources"]["limits"].pop("memory"), "memory request"),
    "init burstable": (_set(_worker_pod, "initContainers", [{"name": "i"}]), "i: cpu"),
    "fractional cpu": (
        lambda d: ray_container(_worker(d))["resources"].update(
            requests={"cpu": "13500m", "memory": "1Gi"}, limits={"cpu": "13500m", "memory": "1Gi"}
        ),
        "whole number",
    ),
    "no anti-affinity": (lambda d: _worker_pod(d).pop("affinity"), "anti-affinity"),
    "per zone": (
        lambda d: _worker_pod(d)["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            0
        ].update(topologyKey="topology.kubernetes.io/zone"),
        "anti-affinity",
    ),
    "other label": (lambda d: _worker(d)["template"]["metadata"].update(labels={"x": "y"}), "anti-affinity"),
    "no pool": (lambda d: _worker_pod(d).pop("nodeSelector"), "nodeSelector"),
    "not hwprof": (_entrypoint("hwprof sweep", "python sweep.py"), "not `hwprof sweep"),
    "attached address": (_entrypoint("--ray auto", "--ray head:6379"), "not auto"),
    "unknown option": (_entrypoint("--models", "--modles"), "refuses"),
    "bad collect option": (
        lambda d: _job(d).__setitem__("entrypoint", _job(d)["entrypoint"] + " -- --itres 3"),
        "refuses",
    ),
    "threads above limit": (_entrypoint("--threads 14", "--threads 16"), "CPU limit"),
    "out not kept": (_entrypoint("--out /results/", "--out /tmp/"), "on no volume"),
    "other cluster": (lambda d: _job(d).update(clusterSelector={"ray.io/cluster": "other"}), "names no RayCluster"),
    "other image": (lambda d: ray_container(_worker(d)).update(image="hwprof:0.0.9"), "images"),
    "other ray": (_set(_cluster, "rayVersion", "2.52.0"), "rayVersion"),
}


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_each_check_fails_on_its_breakage(breakage: str) -> None:
    docs = copy.deepcopy(load_docs())
    breaks, message = BREAKAGES[breakage]
    breaks(docs)
    with pytest.raises(AssertionError, match=re.escape(message)):
        check_all(docs)
