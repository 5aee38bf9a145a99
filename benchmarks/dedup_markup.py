"""Issue 22 item 4, "markup is not memory": open dedup proposals after ingesting ~40 real
documents from /usr/share/doc, before and after, in one run.

Copies the files below (those present) to a temp folder, reads them as ``rcll ingest``
would (``--text-suffix .rst --extensionless-as-text``; HTML/PDF converted in this process
by :func:`rcll.files.convert.convert`, one item per page/section as the workers make them),
and retains everything twice, synchronously, into a scratch database of its own:

- bank ``old``: chunked as before this change (markup-only lines kept);
- bank ``new``: chunked now (markup-only lines dropped, :mod:`rcll.retain.markup`).

Then prints, per bank: units, markup-only units, the pairwise count (the old rule: one
proposal per pair, :func:`rcll.store.dedup.candidate_pairs`) and the open proposals of a real
scan (clusters, markup never proposed), with the biggest clusters and a check that no open
proposal has a markup-only member; and the decisions a person makes on the dedup review
screen (``/ui/banks/{bank}/dedup``, its "open decisions left" count read from the served
page: one per pair or cluster) with the memories those decisions cover.

    HF_HUB_OFFLINE=1 python benchmarks/dedup_markup.py > benchmarks/results/dedup_markup.txt
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DOC = Path("/usr/share/doc")
FILES = [
    *(f"libxslt1-dev/html/html/{n}.html" for n in (
        "index", "book1", "libxslt-xslt", "libxslt-keys", "libxslt-imports", "libxslt-security",
        "libxslt-attributes", "libxslt-documents", "libxslt-namespaces", "libxslt-pattern",
        "libxslt-preproc", "libxslt-xsltlocale")),
    *(f"libffi8/html/{n}.html" for n in (
        "index", "Introduction", "The-Basics", "Simple-Example", "Types", "Structures",
        "Closure-Example", "Missing-Features")),
    "socat/index.html", "socat/socat-multicast.html", "socat/socat-tun.html",
    "nodejs/api/intl.md", "nodejs/api/url.md", "zstd/TESTING.md", "procps/bugs.md",
    "dpkg/spec/triggers.txt",
    "shared-mime-info/shared-mime-info-spec.pdf", "libtasn1-doc/libtasn1.pdf",
    *(f"{n}/copyright" for n in (
        "dbus", "dbus-bin", "dbus-daemon", "dbus-session-bus-common", "dbus-system-bus-common",
        "dbus-user-session", "bsdutils", "bsdextrautils", "cmake", "cmake-data",
        "at-spi2-common", "at-spi2-core")),
]


def copy_folder(dest: Path) -> list[Path]:
    out = []
    for rel in FILES:
        src = DOC / rel
        if src.is_file():
            dst = dest / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            out.append(dst)
    return out


def items_of(folder: Path) -> list[dict]:
    """Retain items as ``rcll ingest`` and the file workers would make them."""
    from rcll.cli.ingest import read_paths, text_suffixes
    from rcll.files.convert import convert

    plan = read_paths([str(folder)], text_suffixes([".rst"]), extensionless=True)
    items = list(plan.items)
    for f in plan.files:
        for i, sec in enumerate(convert(f.read_bytes(), f.name)):
            items.append({"content": sec.text, "document_id": f"{f}#{i}",
                          "metadata": {"path": str(f), "page": sec.page, "section": sec.section}})
    return items, plan


def main() -> None:
    from psycopg.rows import dict_row

    import rcll.retain.pipeline as pipeline
    from api.app import create_app
    from rcll.bootstrap import bootstrap
    from rcll.config import Settings
    from rcll.dev import postgres
    from rcll.dev import redis as dev_redis
    from rcll.retain.markup import is_markup_only
    from rcll.store import dedup, migrate
    from tests.conftest import free_port

    tmp = Path(tempfile.mkdtemp(prefix="dedup-markup-"))
    tmp.chmod(0o755)
    files = copy_folder(tmp / "docs")
    items, plan = items_of(tmp / "docs")
    kinds: dict[str, int] = {}
    for f in files:
        k = f.suffix or "(none)"
        kinds[k] = kinds.get(k, 0) + 1
    print(f"{len(files)} files from {DOC} ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})"
          f" -> {len(items)} retain items; skipped {len(plan.skipped)}")

    port = free_port()
    s = Settings(state_dir=tmp / "state", pg_port=port,
                 database_url=f"postgresql://rcll@127.0.0.1:{port}/rcll_bench",
                 redis_url=f"redis://127.0.0.1:{free_port()}/0", auth=False,
                 max_item_chars=2_000_000, max_items_per_request=100, api_port=free_port(),
                 metrics_port=free_port())
    (tmp / "state").mkdir()
    (tmp / "state").chmod(0o755)
    postgres.start(s, log=lambda *_: None)
    try:
        postgres.create_database(s, "rcll_bench", drop=True)
        migrate.upgrade(s)
        dev_redis.ensure(s, log=lambda *_: None)
        svc = bootstrap(s)
        client = create_app(services=svc).test_client()
        real = pipeline.strip_markup
        for bank, clean in (("old", lambda t: t), ("new", real)):
            pipeline.strip_markup = clean
            t0 = time.monotonic()
            for i in range(0, len(items), 50):
                r = client.post(f"/v1/default/banks/{bank}/memories",
                                json={"items": items[i:i + 50], "async": False})
                assert r.status_code == 200 and r.get_json()["state"] in ("succeeded", "partial"), \
                    r.get_json()
            print(f"bank {bank}: retained in {time.monotonic() - t0:.0f} s")
        pipeline.strip_markup = real
        model = s.embedder_stamp
        print(f"\nscan: newest {s.dedup_window} units, pair floor {s.dedup_min_cosine}, "
              f"cluster floor {s.dedup_cluster_min_cosine}, model {model}\n")
        print(f"{'bank':5} {'units':>6} {'markup-only units':>18} {'pairs (old rule)':>17} "
              f"{'of them with markup':>20} {'open proposals now':>19} {'clusters >2':>12} "
              f"{'review-screen decisions':>24} {'memories covered':>17}")
        for bank in ("old", "new"):
            with svc.pool.connection() as conn:
                conn.row_factory = dict_row
                texts = [r["text"] for r in conn.execute(
                    "SELECT text FROM memory_units WHERE bank_id = %s", (bank,)).fetchall()]
                pairs = dedup.candidate_pairs(conn, bank, model=model, window=s.dedup_window,
                                              min_cosine=s.dedup_min_cosine)
            with svc.pool.connection() as conn, conn.transaction():
                dedup.scan(conn, bank, model=model, window=s.dedup_window,
                           min_cosine=s.dedup_min_cosine,
                           cluster_min_cosine=s.dedup_cluster_min_cosine)
            page = client.get(f"/v1/default/banks/{bank}/dedup-proposals?state=open&limit=1000"
                              ).get_json()
            props = page["proposals"]
            markup_pairs = sum(is_markup_only(p["text_a"]) or is_markup_only(p["text_b"])
                               for p in pairs)
            with svc.pool.connection() as conn:  # full texts, not the previews
                full = {str(r["id"]): r["text"] for r in conn.execute(
                    "SELECT id, text FROM memory_units WHERE id = ANY(%s::uuid[])",
                    ([m["id"] for p in props for m in p["members"]],)).fetchall()}
            bad = [p["id"] for p in props if any(is_markup_only(full[m["id"]])
                                                 for m in p["members"])]
            assert not bad, bad
            html = client.get(f"/ui/banks/{bank}/dedup").get_data(as_text=True)
            shown = re.search(r'data-testid="proposals-left">(\d+)<', html)
            assert shown, "the dedup review screen shows no count"
            covered = len({m["id"] for p in props for m in p["members"]})
            print(f"{bank:5} {len(texts):6} {sum(map(is_markup_only, texts)):18} {len(pairs):17} "
                  f"{markup_pairs:20} {page['total']:19} "
                  f"{sum(p['size'] > 2 for p in props):12} {int(shown.group(1)):24} {covered:17}")
            big = sorted(props, key=lambda p: -p["size"])[:3]
            for p in big:
                if p["size"] > 2:
                    print(f"      cluster of {p['size']} (cosine ≥ {p['cosine']:.3f}): "
                          f"{p['members'][0]['text'][:70]!r}")
        print("\nbefore = bank old, pairs (old rule); after = bank new, open proposals now; "
              "no open proposal has a markup-only member (checked); review-screen decisions = "
              "the count the dedup review screen shows (one per pair or cluster).")
        svc.close()
    finally:
        dev_redis.stop(s)
        postgres.stop(s, log=lambda *_: None)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
