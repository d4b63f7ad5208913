"""Java jars from Maven Central for the test peers: Apache Kafka, its Java clients, Spark's sink.

Not part of the producer: the test harnesses (``apache_kafka``, the Java clients) ask this
module for a class path. It writes a small ``pom.xml`` naming the artifacts into a cache
folder (``$KCLIENT_MAVEN_CACHE``, else ``~/.cache/kclient/maven``), one folder per set of
artifacts, and lets Maven copy them with their runtime dependencies into ``libs/`` there.
Maven keeps its own download cache (``~/.m2``), so a second set sharing jars with a first
downloads nothing again. A set that was copied whole is marked ``complete`` and reused.

A machine without ``java`` or ``mvn`` gets :class:`JavaToolMissing`, one line saying what to
install; nothing here skips.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from xml.sax.saxutils import escape

__all__ = [
    "JavaCompileError",
    "JavaToolMissing",
    "classpath",
    "compile_java",
    "java_major_version",
    "require_java",
]

MINIMUM_JAVA = 17
_COORDINATE = re.compile(r"^([\w.\-]+):([\w.\-]+):([\w.\-]+)(?::([\w.\-]+))?$")


class JavaToolMissing(RuntimeError):
    """``java`` or ``mvn`` is missing or too old for the Java test peers."""


class JavaCompileError(RuntimeError):
    """``javac`` refused a Java test peer's sources (its messages attached)."""


def _cache_root() -> Path:
    configured = os.environ.get("KCLIENT_MAVEN_CACHE")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "kclient" / "maven"


def java_major_version(java: str = "java") -> int:
    """The major version of ``java`` on the PATH (17 for ``17.0.15``)."""
    path = shutil.which(java)
    if path is None:
        raise JavaToolMissing(
            "the Apache Kafka test peers need a JDK 17+ ('java' is not on PATH): "
            "install one, e.g. 'apt-get install openjdk-17-jdk-headless maven'"
        )
    done = subprocess.run(
        [path, "-version"], capture_output=True, text=True, timeout=60, check=False
    )
    found = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr + done.stdout)
    if found is None:
        raise JavaToolMissing(f"cannot read the version of {path}: {done.stderr.strip()!r}")
    major = int(found.group(1))
    if major == 1 and found.group(2):  # "1.8.0_x" is Java 8
        major = int(found.group(2))
    return major


def require_java() -> str:
    """The path of a ``java`` of at least :data:`MINIMUM_JAVA`, else :class:`JavaToolMissing`."""
    major = java_major_version()
    if major < MINIMUM_JAVA:
        raise JavaToolMissing(
            f"the Apache Kafka test peers need Java {MINIMUM_JAVA}+, found Java {major}: "
            "install e.g. 'apt-get install openjdk-17-jdk-headless'"
        )
    path = shutil.which("java")
    assert path is not None
    return path


def _pom(artifacts: Sequence[str]) -> str:
    lines = []
    for coordinate in artifacts:
        match = _COORDINATE.match(coordinate)
        if match is None:
            raise ValueError(
                f"Maven coordinate {coordinate!r} is not group:artifact:version[:classifier]"
            )
        group, artifact, version, classifier = match.groups()
        lines.append(
            "    <dependency>"
            f"<groupId>{escape(group)}</groupId><artifactId>{escape(artifact)}</artifactId>"
            f"<version>{escape(version)}</version>"
            + (f"<classifier>{escape(classifier)}</classifier>" if classifier else "")
            + "</dependency>"
        )
    body = "\n".join(lines)
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kclient.testing</groupId>
  <artifactId>peers</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{body}
  </dependencies>
</project>
"""


def classpath(artifacts: Sequence[str], *, timeout_s: float = 900.0) -> Path:
    """The folder holding ``artifacts`` and their runtime dependencies as jars.

    ``artifacts`` are Maven coordinates (``org.apache.kafka:kafka_2.13:4.4.0``). Use the
    result as ``java -cp '<folder>/*'``. Downloads from Maven Central on first use (about
    a minute for a Kafka broker); later calls return at once.
    """
    if not artifacts:
        raise ValueError("classpath() needs at least one Maven coordinate")
    pom = _pom(artifacts)
    key = hashlib.sha256(pom.encode()).hexdigest()[:16]
    folder = _cache_root() / key
    libs = folder / "libs"
    marker = folder / "complete"
    if marker.exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JavaToolMissing(
            "the Apache Kafka test peers need Maven to fetch their jars ('mvn' is not on "
            "PATH): install it, e.g. 'apt-get install maven'"
        )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pom.xml").write_text(pom)
    staging = folder / "libs.partial"
    shutil.rmtree(staging, ignore_errors=True)
    done = subprocess.run(
        [
            mvn,
            "-q",
            "-B",
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging}",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise RuntimeError(f"Maven could not fetch {', '.join(artifacts)}:\n{tail}")
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
    marker.write_text("\n".join(artifacts) + "\n")
    return libs


def compile_java(sources: Mapping[str, str], libs: Path, *, timeout_s: float = 300.0) -> Path:
    """The folder of classes compiled from ``sources`` (file name -> Java text) against the
    jars in ``libs`` (a :func:`classpath` folder), beside it in the cache and keyed by the
    sources' hash: compiled on first use, reused after. Run them with
    ``java -cp '<folder>:<libs>/*' Main``."""
    digest = hashlib.sha256()
    for name in sorted(sources):
        digest.update(name.encode() + b"\0" + sources[name].encode() + b"\0")
    classes = libs.parent / f"classes-{digest.hexdigest()[:16]}"
    if (classes / "complete").exists():
        return classes
    require_java()
    javac = shutil.which("javac")
    if javac is None:
        raise JavaToolMissing(
            "the Java test peers need a JDK ('javac' is not on PATH): install e.g. "
            "'apt-get install openjdk-17-jdk-headless'"
        )
    with tempfile.TemporaryDirectory(prefix="kclient-javac-") as work:
        files = []
        for name, text in sorted(sources.items()):
            path = Path(work) / name
            path.write_text(text)
            files.append(str(path))
        staging = Path(work) / "classes"
        done = subprocess.run(
            [javac, "-nowarn", "--release", "17", "-cp", f"{libs}/*", "-d", str(staging), *files],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if done.returncode != 0:
            raise JavaCompileError(
                f"javac could not compile {', '.join(sorted(sources))}:\n{done.stderr[-3000:]}"
            )
        (staging / "complete").write_text("\n".join(sorted(sources)) + "\n")
        shutil.rmtree(classes, ignore_errors=True)
        shutil.copytree(staging, classes)
    return classes
