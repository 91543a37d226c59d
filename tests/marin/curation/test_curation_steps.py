"""Curation steps under the StepRunner: outputs, stats.json, bad records, WARC, decontamination, mix."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import zstandard

from marin.curation.documents import utf8_length
from marin.curation.rules import GopherQuality
from marin.data.corpus.web import truth
from marin.execution.errors import StepDefinitionError
from marin.execution.lazy import lower
from marin.execution.step_runner import StepFailedError, StepRunner
from marin.experiment.curation import (
    decontaminate,
    dedup_exact,
    extract_text,
    filter_language,
    filter_quality,
    mix,
)
from zephyr import ZephyrConfig

SYNC = ZephyrConfig(backend="sync", quiet=True)
ARTICLE = ("The baker painted the old bridge near the harbor with great care. " * 3).strip()


def read_dir(folder: str) -> list[dict]:
    out = []
    for part in sorted(Path(folder).glob("part-*.jsonl.zst")):
        data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(part.read_bytes())).read()
        out += [json.loads(line) for line in data.splitlines()]
    return out


def run(tmp_path, handle):
    result = StepRunner(prefix=str(tmp_path / "prefix"), progress=False).run([lower(handle)])
    path = result.output_path(lower(handle))
    return path, json.loads((Path(path) / "stats.json").read_text())


@pytest.mark.parametrize(
    "text", ["", "plain ascii", "caf\u00e9 \u4e2d\u6587 \U0001f600", "lone \ud800 surrogate"]
)
def test_byte_counts_are_utf8_lengths_with_lone_surrogates_encoded(text):
    assert utf8_length(text) == len(text.encode("utf-8", "surrogatepass"))


def test_a_chain_on_web_synth_writes_shards_and_stats_with_reasons_and_examples(tmp_path):
    pages = 300
    text = extract_text("c/extract", f"marin://web-synth?pages={pages}", zephyr=SYNC)
    english = filter_language("c/lang", text, zephyr=SYNC)
    path, stats = run(tmp_path, english)
    records = read_dir(path)
    assert stats["documents_in"] == pages and stats["documents_out"] == len(records)
    assert stats["bytes_out"] <= stats["bytes_in"]
    foreign = {t.id for t in map(truth, range(pages)) if t.kind == "foreign"}
    kept = {r["id"] for r in records}
    assert foreign and not foreign & kept
    assert all(r["language"] == "en" and "html" not in r for r in records)
    other = [k for k in stats["drops"] if k.startswith("language.other:")]
    assert other and all(len(stats["dropped_examples"][k]) <= 3 for k in other)
    example = stats["dropped_examples"][other[0]][0]
    assert ".jsonl.zst:" in example["where"] and example["id"].startswith("web-")  # file:record of the input


def test_quality_thresholds_are_in_the_key_and_each_drop_names_its_rule(tmp_path):
    src = tmp_path / "docs.jsonl"
    src.write_text(
        "\n".join(
            json.dumps({"id": i, "text": t})
            for i, t in enumerate([ARTICLE + " " + ARTICLE, "short text", "# # # # " * 20])
        )
        + "\n"
    )
    strict = filter_quality("c/q", str(src), rules=[GopherQuality(min_doc_words=200)], zephyr=SYNC)
    default = filter_quality("c/q", str(src), rules=["gopher_quality"], zephyr=SYNC)
    assert lower(strict).hash_attrs != lower(default).hash_attrs
    assert lower(strict).hash_attrs["transform"]["rules"][0]["config"]["min_doc_words"] == 200
    _, stats = run(tmp_path, default)
    assert stats["documents_out"] == 1
    assert stats["drops"] == {"gopher_quality.min_doc_words": 2}


def test_bad_records_fail_naming_file_and_line_or_are_skipped_and_counted(tmp_path):
    src = tmp_path / "docs.jsonl"
    src.write_bytes(
        json.dumps({"text": ARTICLE}).encode() + b"\n{not json\n" + json.dumps({"text": 3}).encode() + b"\n"
    )
    with pytest.raises(StepFailedError, match=r"docs.jsonl:2"):
        run(tmp_path / "fail", dedup_exact("c/d", str(src), zephyr=SYNC))
    _, stats = run(tmp_path / "skip", dedup_exact("c/d", str(src), bad_records="skip", zephyr=SYNC))
    assert stats["bad_records"] == 2 and stats["documents_out"] == 1
    assert any("docs.jsonl:2" in e for e in stats["bad_record_examples"])


def warc_record(n: int, payload: bytes, charset: str = "utf-8") -> bytes:
    http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=" + charset.encode() + b"\r\n\r\n" + payload
    head = (
        f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-{n:012d}>\r\n"
        f"WARC-Target-URI: https://example.test/{n}\r\nContent-Type: application/http; msgtype=response\r\n"
        f"Content-Length: {len(http)}\r\n\r\n"
    ).encode()
    return head + http + b"\r\n\r\n"


def test_warc_extraction_and_an_undecodable_payload_named_by_file_and_record(tmp_path):
    good = f"<html><body><nav>Home | About</nav><main><p>{ARTICLE}</p></main></body></html>".encode()
    warc = tmp_path / "crawl.warc"
    warc.write_bytes(warc_record(1, good) + warc_record(2, b"<p>\xff\xfe broken</p>") + warc_record(3, good))
    step = extract_text("c/warc", str(warc), format="warc", bad_records="skip", zephyr=SYNC)
    path, stats = run(tmp_path, step)
    records = read_dir(path)
    assert len(records) == 2 and ARTICLE in records[0]["text"] and "Home | About" not in records[0]["text"]
    assert stats["bad_records"] == 1 and "crawl.warc:2" in stats["bad_record_examples"][0]
    with pytest.raises(StepFailedError, match=r"crawl.warc:2"):
        run(tmp_path / "strict", extract_text("c/warc", str(warc), format="warc", zephyr=SYNC))


def test_decontaminate_drops_documents_sharing_a_13_gram_with_an_eval_step(tmp_path):
    evals = tmp_path / "eval.jsonl"
    leaked = "the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat today"
    evals.write_text(json.dumps({"text": leaked}) + "\n")
    train = tmp_path / "train.jsonl"
    train.write_text(
        json.dumps({"id": 0, "text": "intro " + leaked + " outro"})
        + "\n"
        + json.dumps({"id": 1, "text": ARTICLE})
        + "\n"
    )
    eval_step = dedup_exact("eval/clean", str(evals), zephyr=SYNC)
    step = decontaminate("c/decon", str(train), against=[eval_step], zephyr=SYNC)
    assert lower(eval_step) in lower(step).deps
    path, stats = run(tmp_path, step)
    assert [r["id"] for r in read_dir(path)] == [1]
    assert stats["drops"] == {"decontaminate.ngram_overlap": 1}


def test_mix_takes_each_inputs_share_deterministically(tmp_path):
    files = []
    for name in ("a", "b"):
        f = tmp_path / f"{name}.jsonl"
        f.write_text(
            "".join(
                json.dumps({"id": f"{name}{i}", "text": f"{name} document {i}"}) + "\n" for i in range(50)
            )
        )
        files.append(str(f))
    step = mix("c/mix", {files[0]: 3.0, files[1]: 1.0}, total_documents=40, zephyr=SYNC)
    path, stats = run(tmp_path, step)
    ids = [r["id"] for r in read_dir(path)]
    assert sum(i.startswith("a") for i in ids) == 30 and sum(i.startswith("b") for i in ids) == 10
    again, _ = run(
        tmp_path / "again",
        mix(
            "c/mix",
            {files[0]: 3.0, files[1]: 1.0},
            total_documents=40,
            zephyr=ZephyrConfig(backend="processes", num_workers=2, quiet=True),
        ),
    )
    assert [r["id"] for r in read_dir(again)] == ids
    assert stats["shares"] == {files[0]: 30, files[1]: 10}


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: extract_text("c/x", 3),
            r"input must be a path or glob, a StepSpec or a step handle, got int",
        ),
        (lambda: dedup_exact("c/x", ["a.jsonl", None]), r"input\[1\] must be a path"),
        (lambda: filter_quality("c/x", "a.jsonl", rules=["gopher"]), "unknown quality rule"),
        (lambda: dedup_exact("c/x", "marin://nope"), "unknown embedded corpus"),
        (lambda: mix("c/x", {"a.jsonl": 0}, total_documents=3), r"weights\[0\] must be a positive number"),
    ],
)
def test_bad_declarations_name_the_argument(call, message):
    with pytest.raises(StepDefinitionError, match=message):
        call()


def test_the_custom_filter_in_the_docs_runs_as_a_step(tmp_path):
    doc = (Path(__file__).resolve().parents[3] / "docs" / "curation.md").read_text()
    code = doc.split("## Writing your own filter")[1].split("```python\n")[1].split("```")[0]
    src = tmp_path / "docs.jsonl"
    src.write_text(
        json.dumps({"id": 1, "text": "short"}) + "\n" + json.dumps({"id": 2, "text": "x" * 30_000}) + "\n"
    )
    namespace: dict = {}
    exec(code.replace("/data/clean/*.jsonl.zst", str(src)), namespace)  # noqa: S102 -- the docs example, run as written
    path, stats = run(tmp_path, namespace["step"])
    assert [r["id"] for r in read_dir(path)] == [1]
    assert stats["drops"] == {"max_length.too_long": 1}


def test_a_malformed_warc_record_is_a_bad_record_at_its_place(tmp_path):
    good = f"<html><body><main><p>{ARTICLE}</p></main></body></html>".encode()
    warc = tmp_path / "broken.warc"
    warc.write_bytes(warc_record(1, good) + b"GARBAGE, NOT A WARC HEADER\r\n\r\n" + warc_record(3, good))
    path, stats = run(
        tmp_path, extract_text("c/broken", str(warc), format="warc", bad_records="skip", zephyr=SYNC)
    )
    assert len(read_dir(path)) == 1
    assert (
        stats["bad_records"] == 1
        and "broken.warc:2: malformed WARC record" in stats["bad_record_examples"][0]
    )
    with pytest.raises(StepFailedError, match=r"broken.warc:2"):
        run(tmp_path / "strict", extract_text("c/broken", str(warc), format="warc", zephyr=SYNC))


def read_rejected(folder: str) -> list[dict]:
    return read_dir(str(Path(folder) / "_rejected"))


def test_rejected_writes_each_dropped_document_with_its_rule_and_place(tmp_path):
    src = tmp_path / "docs.jsonl"
    texts = [ARTICLE + " " + ARTICLE, "short text", ARTICLE + " " + ARTICLE, "# # # # " * 20]
    src.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)))
    quality = filter_quality("c/q", str(src), rules=["gopher_quality"], rejected=True, zephyr=SYNC)
    deduped = dedup_exact("c/d", quality, rejected=True, zephyr=SYNC)
    assert (
        lower(quality).hash_attrs
        != lower(filter_quality("c/q", str(src), rules=["gopher_quality"])).hash_attrs
    )
    path, stats = run(tmp_path, deduped)
    assert [r["id"] for r in read_dir(path)] == [0]  # the dedup step read its input's data, not _rejected/
    duplicate = read_rejected(path)
    assert [(r["id"], r["rejected_by"]) for r in duplicate] == [(2, "dedup_exact.duplicate")]
    assert duplicate[0]["rejected_at"].endswith(":2") and duplicate[0]["duplicate_of"].endswith(":1")
    runner = StepRunner(prefix=str(tmp_path / "prefix"), progress=False)
    quality_path = runner.plan([lower(quality)]).of(lower(quality)).output_path
    dropped = read_rejected(quality_path)
    assert [(r["id"], r["rejected_by"], r["text"]) for r in dropped] == [
        (1, "gopher_quality.min_doc_words", "short text"),
        (3, "gopher_quality.min_doc_words", texts[3]),
    ]
    assert dropped[0]["rejected_at"] == f"{src}:2"
    assert not (
        Path(run(tmp_path / "plain", dedup_exact("c/d", str(src), zephyr=SYNC))[0]) / "_rejected"
    ).exists()


def test_decontaminate_against_a_text_dataset_and_the_story_corpus(tmp_path):
    from marin.data.corpus import story
    from marin.evaluation.documents import TextDataset

    notes = tmp_path / "notes.jsonl"
    leaked = "the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat today"
    notes.write_text(json.dumps({"body": leaked}) + "\n")
    told = str(story(49_990))
    train = tmp_path / "train.jsonl"
    train.write_text(
        "".join(
            json.dumps({"id": i, "text": t}) + "\n"
            for i, t in enumerate(["intro " + leaked, ARTICLE, "once more: " + told, str(story(10))])
        )
    )
    evals = TextDataset("notes", (str(notes),), text_field="body")
    stories = "marin://tinystories-synth?start=49950&stop=50000"
    step = decontaminate("c/decon", str(train), against=[evals, stories], zephyr=SYNC)
    assert lower(step).hash_attrs["transform"]["against"] == [str(notes), stories]
    assert lower(step).hash_attrs["transform"]["against_fields"] == ["body", "text"]
    path, stats = run(tmp_path, step)
    assert [r["id"] for r in read_dir(path)] == [1, 3]  # story 10 is not among the evaluated ones
    assert stats["drops"] == {"decontaminate.ngram_overlap": 2}
    with pytest.raises(StepDefinitionError, match="start and stop must be integers"):
        decontaminate("c/x", str(train), against=["marin://tinystories-synth?start=9&stop=2"])


def test_warc_records_are_numbered_by_their_place_among_all_records(tmp_path):
    info = (
        b"WARC/1.0\r\nWARC-Type: warcinfo\r\nContent-Type: application/warc-fields\r\n"
        b"Content-Length: 9\r\n\r\nsoftware\n\r\n\r\n"
    )
    good = f"<html><body><main><p>{ARTICLE}</p></main></body></html>".encode()
    warc = tmp_path / "crawl.warc"
    warc.write_bytes(info + warc_record(1, good) + warc_record(2, b"<p>\xff\xfe broken</p>"))
    _, stats = run(
        tmp_path, extract_text("c/warc", str(warc), format="warc", bad_records="skip", zephyr=SYNC)
    )
    assert stats["documents_in"] == 1 and stats["bad_records"] == 1
    assert "crawl.warc:3:" in stats["bad_record_examples"][0]  # the warcinfo record is record 1
