"""Query preparation, deterministic (spec §5, tier 3 step 1): the time window the query
names and the bank's entities it mentions. No language model, no HyDE.

**Time window.** The reference time is the request's ``query_timestamp`` (UTC), else now.
A query gets a window only when it holds a recognised time expression — strict patterns,
so "May I ask", "the march", "3 kids" or "Mondays" make none. The calendar dates among them
("May 7", "7th of May 2023", "3/4/2023") are resolved by :mod:`dateparser` (``parse`` with
``RELATIVE_BASE`` = the reference and ``PREFER_DATES_FROM = past``); the periods dateparser
would turn into one instant follow the small rules below. Windows are half-open
``[start, end)`` in UTC, day boundaries at 00:00 UTC:

=========================================  ====================================================
expression                                 window
=========================================  ====================================================
``2023-05-07``, ``May 7``, ``7 May 2023``  that day
``2023-05``, ``May 2023``                  that month
``last May``                               May 1–31 of the last May that ended before the
                                           reference
``in May``, ``this May``, ``early May``    the most recent May that began before the reference
``next May``                               the first May after the reference
``in 2023``, ``during 2023``, ``of 2023``  the whole year
``yesterday``, ``last night``              the day before the reference
``today``, ``tonight``, ``this morning``   the reference's day
``N days ago``                             that day ± 1 day (N = 1: that day)
``a few days ago``                         the 7 days before the reference
``N weeks ago``                            the Monday–Sunday week holding reference − N weeks,
                                           ± 3 days
``N months ago``                           the calendar month of reference − N months, ± 7 days
``N years ago``                            that calendar year
``last/this/next week|month|year``         the previous/current/next calendar week (Monday
                                           first), month, year
``last weekend``                           the last Saturday–Sunday that ended before the
                                           reference's day
``the past/last N days|weeks|months``      reference − N units up to the end of the
                                           reference's day
``on Monday``, ``last Monday``, ``Monday`` the last Monday before the reference's day
``this Monday``                            the Monday of the reference's week
=========================================  ====================================================

N is a number (``2``) or a number word (``two``, ``a``, ``a couple of``). ± pads are choices
for approximate speech ("two weeks ago" is rarely exact), not fitted figures.

**Entities.** The bank's live entities (``merged_into_id IS NULL``) whose normalized name or
an alias equals a run of whole words of the query, normalized the way the entities stage
normalizes names (:func:`rcll.entities.extractor.normalize`): one indexed query over the
query's word n-grams (``entities_bank_normalized``, ``entities_aliases``), whatever the
bank's size.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

from psycopg import Connection

from rcll.entities.extractor import normalize
from rcll.search.channels import PreparedQuery
from rcll.search.scope import CallerScope

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")
_MONTH_NUM = {m: i for i, m in enumerate(MONTHS, 1)}
_MONTH_NUM.update({m[:3]: i for i, m in enumerate(MONTHS, 1)})
_MONTH_NUM["sept"] = 9
# Month names that are also common words: counted only when capitalised as written, or after
# "last"/"next"/"early"/"late"/"mid" ("May I ask", "the march", "this may help" make none).
AMBIGUOUS_MONTHS = frozenset({"may", "march"})
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
                "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11,
                "twelve": 12, "a couple of": 2, "couple of": 2, "a couple": 2, "a few": 3,
                "few": 3, "several": 3}
MAX_NGRAM = 6  # longest entity name matched, in words
MAX_QUERY_WORDS = 200  # n-grams are taken from the first words only (queries ≤ 2,000 chars)

_FULL_MONTH = "|".join(MONTHS)
_ANY_MONTH = _FULL_MONTH + "|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec"
_NUM = r"\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve" \
       r"|(?:a\s+)?couple(?:\s+of)?|(?:a\s+)?few|several"
_DAYNUM = r"(\d{1,2})(?:st|nd|rd|th)?(?!\d)"
_I = re.IGNORECASE


def _rx(pattern: str) -> re.Pattern:
    return re.compile(pattern, _I)


# (name, pattern), tried in this order; the first pattern that matches names the window.
PATTERNS: list[tuple[str, re.Pattern]] = [
    ("iso_day", _rx(r"(?<![\d-])(\d{4})-(\d{1,2})-(\d{1,2})(?![\d-])")),
    ("iso_month", _rx(r"(?<![\d-])(\d{4})-(\d{2})(?![\d-])")),
    ("day_month", _rx(rf"\b(?:the\s+)?{_DAYNUM}\s+(?:of\s+)?({_ANY_MONTH})\.?\b(?:,?\s+(\d{{4}})\b)?")),
    ("month_day", _rx(rf"\b({_ANY_MONTH})\.?\s+{_DAYNUM}\b(?:,?\s+(\d{{4}})\b)?")),
    ("numeric_date", _rx(r"(?<![\d/])(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})(?![\d/])")),
    ("month_year", _rx(rf"\b({_ANY_MONTH})\.?,?\s+(?:of\s+)?(\d{{4}})\b")),
    ("days_ago_few", _rx(r"\b(?:a\s+)?few\s+days\s+ago\b")),
    ("ago", _rx(rf"\b({_NUM})\s+(day|week|month|year)s?\s+ago\b")),
    ("past_n", _rx(rf"\b(?:the\s+)?(?:past|last|previous)\s+({_NUM})\s+(day|week|month|year)s\b")),
    ("day_before_yesterday", _rx(r"\bthe\s+day\s+before\s+yesterday\b")),
    ("yesterday", _rx(r"\b(?:yesterday|last\s+night)\b")),
    ("today", _rx(r"\b(?:today|tonight|this\s+(?:morning|afternoon|evening))\b")),
    ("weekend", _rx(r"\b(?:last|this|past|previous)\s+weekend\b")),
    ("relative_period", _rx(r"\b(?:(earlier|later)\s+)?(last|this|next|past|previous)\s+"
                            r"(week|month|year)\b")),
    ("modified_month", _rx(r"\b(last|this|next|in|during|since|early|late|mid|mid-)\s*"
                           rf"(?:in\s+|of\s+)?({_FULL_MONTH})\b")),
    ("year", _rx(r"\b(?:in|during|since|throughout|of|early|late|mid|mid-|the\s+year)\s*"
                 r"((?:19|20)\d{2})\b(?![\d/:-])")),
    ("weekday", _rx(rf"\b(?:(on|last|this|past|previous)\s+)?({'|'.join(WEEKDAYS)})\b(?!s\b|'s\b)")),
]


def prepare_query(conn: Connection, scope: CallerScope, pq: PreparedQuery, *,
                  time_window: bool = True, entities: bool = True) -> None:
    """Fill ``pq.reference_time`` (the request's ``query_timestamp`` or now, UTC); with
    ``time_window``, ``pq.time_window`` (``(start, end)`` UTC datetimes, half-open) and
    ``pq.time_expression`` (the matched text) when the query names a time; with
    ``entities``, ``pq.entities`` = ``[{"id", "name", "matched"}]`` (one read query; none
    when ``pq.entities_ready``: an earlier tier of the same recall matched them).
    Raises only database errors."""
    ref = pq.request.query_timestamp or datetime.now(UTC)
    pq.reference_time = ref if ref.tzinfo else ref.replace(tzinfo=UTC)
    if time_window:
        found = resolve_time(pq.text, pq.reference_time)
        if found is not None:
            pq.time_window, pq.time_expression = found[0], found[1]
    if entities and not pq.entities_ready:  # matched once per recall, for every tier
        pq.entities = match_entities(conn, scope.bank_id, pq.text, scope)
        pq.entities_ready = True


# ---- time ------------------------------------------------------------------------------


MAX_CANDIDATES = 12  # time-expression matches tried per query


def resolve_time(text: str, reference: datetime) -> tuple[tuple[datetime, datetime], str] | None:
    """``((start, end), expression)`` for the first time expression of ``text`` relative to
    ``reference`` (tz-aware; converted to UTC), or ``None`` when it names no time. ``start``
    and ``end`` are UTC datetimes, ``end`` exclusive. Raises nothing.

    At most :data:`MAX_CANDIDATES` matches are tried: a query of hundreds of invalid dates
    ("June 31 June 31 …") would otherwise call the date parser hundreds of times (1 s)."""
    ref = reference.astimezone(UTC)
    tried = 0
    for name, rx in PATTERNS:
        for m in rx.finditer(text):
            tried += 1
            if tried > MAX_CANDIDATES:
                return None
            try:
                window = _RULES[name](m, ref)
            except (ValueError, OverflowError):
                window = None
            if window is not None:
                return window, m.group(0).strip()
    return None


def _day(d: date) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


def _days(d: date, n: int = 1) -> tuple[datetime, datetime]:
    return _day(d), _day(d) + timedelta(days=n)


def _month(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def _year(year: int) -> tuple[datetime, datetime]:
    return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)


def _week(d: date) -> tuple[datetime, datetime]:
    monday = d - timedelta(days=d.weekday())
    return _days(monday, 7)


def _pad(w: tuple[datetime, datetime], days: int) -> tuple[datetime, datetime]:
    return w[0] - timedelta(days=days), w[1] + timedelta(days=days)


def _shift_months(year: int, month: int, by: int) -> tuple[int, int]:
    k = year * 12 + (month - 1) + by
    return k // 12, k % 12 + 1


def _number(word: str) -> int | None:
    w = re.sub(r"\s+", " ", word.strip().casefold())
    if w.isdigit():
        return int(w)
    return NUMBER_WORDS.get(w)


def _dateparser(text: str, ref: datetime) -> datetime | None:
    import dateparser  # imported on first use: its start-up costs ~0.4 s

    return dateparser.parse(text, languages=["en"], settings={
        "RELATIVE_BASE": ref.replace(tzinfo=None), "PREFER_DATES_FROM": "past",
        "PREFER_DAY_OF_MONTH": "first", "RETURN_AS_TIMEZONE_AWARE": False})


def _month_ok(m: re.Match, group: int, ref_word: str | None = None) -> bool:
    """A month name that is also a common word counts only when capitalised as written or
    after a strong modifier (last, next, early, late, mid)."""
    word = m.group(group)
    if word.casefold() not in AMBIGUOUS_MONTHS:
        return True
    if ref_word and ref_word.casefold().rstrip("-") in ("last", "next", "early", "late", "mid"):
        return True
    return word[0].isupper()


def _r_iso_day(m, ref):
    return _days(date(int(m.group(1)), int(m.group(2)), int(m.group(3))))


def _r_iso_month(m, ref):
    y, mo = int(m.group(1)), int(m.group(2))
    return _month(y, mo) if 1 <= mo <= 12 else None


def _r_day_month(m, ref):
    return _calendar_date(m, ref, day_group=1, month_group=2)


def _r_month_day(m, ref):
    return _calendar_date(m, ref, day_group=2, month_group=1)


def _calendar_date(m, ref, day_group: int | None = None, month_group: int | None = None):
    """A calendar date resolved by dateparser (a missing year: the last one before the
    reference); ``None`` for an ambiguous month word or a day out of range."""
    if month_group is not None and not _month_ok(m, month_group):
        return None
    if day_group is not None and not 1 <= int(m.group(day_group)) <= 31:
        return None
    dt = _dateparser(m.group(0), ref)
    return _days(dt.date()) if dt is not None else None


def _r_month_year(m, ref):
    if not _month_ok(m, 1):
        return None
    return _month(int(m.group(2)), _MONTH_NUM[m.group(1).casefold().rstrip(".")])


def _r_few_days(m, ref):
    return _day(ref.date()) - timedelta(days=7), _day(ref.date())


def _r_ago(m, ref):
    n, unit = _number(m.group(1)), m.group(2).casefold()
    if n is None or n > 500:
        return None
    d = ref.date()
    if unit == "day":
        anchor = d - timedelta(days=n)
        return _days(anchor) if n <= 1 else _pad(_days(anchor), 1)
    if unit == "week":
        return _pad(_week(d - timedelta(weeks=n)), 3)
    if unit == "month":
        return _pad(_month(*_shift_months(d.year, d.month, -n)), 7)
    return _year(d.year - n)


def _r_past_n(m, ref):
    n, unit = _number(m.group(1)), m.group(2).casefold()
    if n is None or n > 500:
        return None
    end = _day(ref.date()) + timedelta(days=1)
    d = ref.date()
    if unit == "day":
        start = _day(d - timedelta(days=n))
    elif unit == "week":
        start = _day(d - timedelta(weeks=n))
    elif unit == "month":
        y, mo = _shift_months(d.year, d.month, -n)
        start = datetime(y, mo, min(d.day, 28), tzinfo=UTC)
    else:
        start = datetime(d.year - n, d.month, min(d.day, 28), tzinfo=UTC)
    return start, end


def _r_day_before_yesterday(m, ref):
    return _days(ref.date() - timedelta(days=2))


def _r_yesterday(m, ref):
    return _days(ref.date() - timedelta(days=1))


def _r_today(m, ref):
    return _days(ref.date())


def _r_weekend(m, ref):
    d = ref.date()
    if m.group(0).casefold().startswith("this"):
        sat = d + timedelta(days=(5 - d.weekday()) % 7) if d.weekday() < 5 else \
            d - timedelta(days=d.weekday() - 5)
        return _days(sat, 2)
    # the last Saturday–Sunday that ended before the reference's day
    sunday = d - timedelta(days=(d.weekday() + 1) % 7 or 7)
    return _days(sunday - timedelta(days=1), 2)


def _r_relative_period(m, ref):
    early, which, unit = (m.group(1) or "").casefold(), m.group(2).casefold(), m.group(3).casefold()
    step = {"last": -1, "past": -1, "previous": -1, "this": 0, "next": 1}[which]
    d = ref.date()
    if unit == "week":
        w = _week(d + timedelta(weeks=step))
    elif unit == "month":
        w = _month(*_shift_months(d.year, d.month, step))
    else:
        w = _year(d.year + step)
    if early == "earlier" and step == 0:  # "earlier this week": up to the reference
        w = (w[0], min(w[1], _day(d) + timedelta(days=1)))
    return w


def _r_modified_month(m, ref):
    word, name = m.group(1).casefold(), m.group(2)
    if not _month_ok(m, 2, word):
        return None
    month = _MONTH_NUM[name.casefold()]
    y = ref.year
    if word == "last":  # the last such month that ended before the reference
        while _month(y, month)[1] > ref:
            y -= 1
    elif word == "next":  # the first such month that begins after the reference
        while _month(y, month)[0] <= ref:
            y += 1
    elif word != "this":  # in/during/since/early/late/mid: the most recent one begun
        while _month(y, month)[0] > ref:
            y -= 1
    w = _month(y, month)
    if word == "since":
        return w[0], max(w[1], _day(ref.date()) + timedelta(days=1))
    return w


def _r_year(m, ref):
    y = int(m.group(1))
    w = _year(y)
    if m.group(0).casefold().startswith("since"):
        return w[0], max(w[1], _day(ref.date()) + timedelta(days=1))
    return w


def _r_weekday(m, ref):
    word, name = (m.group(1) or "").casefold(), m.group(2).casefold()
    wd = WEEKDAYS.index(name)
    d = ref.date()
    if word == "this":
        return _days(d - timedelta(days=d.weekday()) + timedelta(days=wd))
    back = (d.weekday() - wd) % 7 or 7  # the last one before the reference's day
    return _days(d - timedelta(days=back))


_RULES = {
    "iso_day": _r_iso_day, "iso_month": _r_iso_month, "day_month": _r_day_month,
    "month_day": _r_month_day, "numeric_date": _calendar_date,
    "month_year": _r_month_year, "days_ago_few": _r_few_days, "ago": _r_ago,
    "past_n": _r_past_n, "day_before_yesterday": _r_day_before_yesterday,
    "yesterday": _r_yesterday, "today": _r_today, "weekend": _r_weekend,
    "relative_period": _r_relative_period, "modified_month": _r_modified_month,
    "year": _r_year, "weekday": _r_weekday,
}


# ---- entities --------------------------------------------------------------------------


def query_ngrams(text: str) -> tuple[list[str], dict[str, str]]:
    """The normalized word runs of ``text`` (1..``MAX_NGRAM`` words) an entity name could
    equal, and for each the text it came from: runs of :func:`normalize`-d words (names,
    acronyms, titles) plus whitespace tokens normalized as handles, emails, hashtags and
    identifiers are (casefolded, outer punctuation stripped)."""
    out: dict[str, str] = {}
    words = normalize(text).split()[:MAX_QUERY_WORDS]
    for i in range(len(words)):
        for n in range(1, MAX_NGRAM + 1):
            if i + n > len(words):
                break
            gram = " ".join(words[i:i + n])
            out.setdefault(gram, gram)
    for tok in text.split()[:MAX_QUERY_WORDS]:
        raw = tok.strip(".,;:!?\"'()[]{}“”‘’").casefold()
        if raw.endswith("'s") or raw.endswith("’s"):
            raw = raw[:-2]
        if len(raw) >= 2:
            out.setdefault(raw, tok)
    return list(out), out


def match_entities(conn: Connection, bank_id: str, text: str,
                   scope: CallerScope | None = None) -> list[dict]:
    """The live entities of ``bank_id`` whose normalized name or an alias is a whole-word
    run of ``text``: ``[{"id", "name", "matched"}]`` (``matched``: the normalized words that
    matched), longest match first, then by name. With a ``scope`` that restricts audience or
    purpose, only entities mentioned by at least one unit the caller may see (an entity
    known only from another member's private units is not matched, so neither the trace's
    ``query.entities`` nor any channel learns of it). One indexed query; raises only
    database errors."""
    grams, _ = query_ngrams(text)
    if not grams:
        return []
    seen_sql, seen_params = "", {}
    if scope is not None and scope.restricted:
        vis, seen_params = scope.visibility("u")
        seen_sql = f"""AND EXISTS (SELECT 1 FROM unit_entities ue
                                   JOIN memory_units u ON u.id = ue.unit_id
                                   WHERE ue.entity_id = e.id AND {vis})"""
    rows = conn.execute(
        f"""SELECT e.id::text AS id, e.name, e.normalized,
                  ARRAY(SELECT a FROM unnest(e.aliases) a WHERE a = ANY(%(grams)s)) AS hit
           FROM entities e
           WHERE e.bank_id = %(bank_id)s AND e.merged_into_id IS NULL
             AND (e.normalized = ANY(%(grams)s) OR e.aliases && %(grams)s::text[])
             {seen_sql}""",
        {"bank_id": bank_id, "grams": grams, **seen_params}).fetchall()
    gram_set = set(grams)
    out = []
    for r in rows:
        matched = r["normalized"] if r["normalized"] in gram_set else max(r["hit"], key=len)
        out.append({"id": r["id"], "name": r["name"], "matched": matched})
    out.sort(key=lambda e: (-len(e["matched"]), e["name"], e["id"]))
    return out
