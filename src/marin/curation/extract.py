"""Text extraction from HTML (resiliparse's main-content extractor) and WARC reading (fastwarc)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from zephyr.io import ShardStats


def html_to_text(html: str) -> str:
    """The main content of a page as plain text: menus, footers and other boilerplate removed."""
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(
        html, main_content=True, alt_texts=False, links=False, list_bullets=False
    ).strip()


def read_warc(path: str, bad_records: str, stats: ShardStats) -> Iterator[tuple[str, int, dict]]:
    """(path, record number, {"id", "url", "html"}) for each HTTP response of a WARC file.

    Records are numbered by their place in the file, every record counted (warcinfo, request,
    metadata, ...), so `path:N` is the file's Nth record whatever its type. A payload that is not
    valid text in its declared charset (or UTF-8) is a bad record at path:record; so is a malformed
    record header, after which the rest of the file cannot be read.
    """
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    from marin.curation.documents import report_bad
    from storage import open_read

    with open_read(path) as stream:
        records = ArchiveIterator(stream, parse_http=True)
        n = 0
        while True:
            n += 1
            try:
                record = next(records)
                if record.record_type != WarcRecordType.response:
                    continue
                body = record.reader.read()
            except StopIteration:
                return
            except OSError as e:  # a broken header: the records after it cannot be found
                report_bad(
                    bad_records,
                    stats,
                    path,
                    n,
                    f"malformed WARC record ({e}); the rest of the file is skipped",
                )
                return
            charset = "utf-8"
            if record.http_headers is not None:
                ctype = record.http_headers.get("Content-Type", "") or ""
                if "charset=" in ctype:
                    charset = ctype.split("charset=", 1)[1].split(";")[0].strip() or "utf-8"
            try:
                html = body.decode(charset)
            except (UnicodeDecodeError, LookupError) as e:
                report_bad(
                    bad_records, stats, path, n, f"payload is not {charset} text ({e.__class__.__name__})"
                )
                continue
            yield (
                path,
                n,
                {"id": record.record_id, "url": record.headers.get("WARC-Target-URI"), "html": html},
            )


@dataclass(frozen=True)
class ExtractText:
    """Replace the record's `html_key` field by the extracted `text`; pages with no main text are dropped."""

    html_key: str = "html"
    text_key: str = "text"
    format: str = "html"
    name: str = "extract"

    def describe(self) -> dict:
        import resiliparse

        return {
            "extractor": "resiliparse.extract_plain_text(main_content=True)",
            "format": self.format,
            "extractor_version": getattr(resiliparse, "__version__", "unknown"),
            "html_key": self.html_key,
            "text_key": self.text_key,
        }

    def input_text(self, record: dict):
        return record.get(self.html_key)

    def __call__(self, record: dict, html: str) -> tuple[dict | None, str | None]:
        text = html_to_text(html)
        if not text:
            return None, "extract.no_main_text"
        out = {k: v for k, v in record.items() if k != self.html_key}
        out[self.text_key] = text
        return out, None
