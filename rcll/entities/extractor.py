"""Deterministic entity extractor: names found in a text by pattern, no model (spec §4 step 3).

It runs in every mode, chunk mode included, so a bank has entities and an entity graph
without an LLM. :func:`extract` returns :class:`Mention` ``(surface, normalized,
entity_type)`` for:

- ``person`` — speaker names: a ``Name:`` prefix at the start of a line, and item metadata
  (``speaker``, ``author``, ``user``, ``from``, ``sender``);
- ``person`` also for a name after an honorific with its period (``Dr. Smith``,
  ``Mrs. Okafor``: the period does not end a sentence; ``St. Louis`` is a ``name``);
- ``name`` — capitalised names: runs of two or more capitalised words (``New York``,
  ``Bank of America``), and single capitalised words that are not sentence-initial
  (``... with Caroline``) or, opening a sentence or following a speaker label, are followed
  by what marks a person (``Priya said``, ``Tigran from procurement``, ``Ingrid and Farah``:
  :func:`_person_cue`); leading stop words are dropped (``The``, ``Hey``, days, months);
- ``acronym`` — 2–6 capital letters (``LGBTQ``, ``NASA``), stop-listed ones excepted;
- ``title`` — quoted titles: ``"Charlotte's Web"``, ``“The Road”`` (capitalised, ≤ 6 words,
  not a quoted sentence);
- ``handle`` (``@dana``), ``email``, ``hashtag`` (``#launch``);
- ``identifier`` — code-like names: ``snake_case``, ``CamelCase``/``camelCase``,
  ``dotted.names``;
- ``numbered`` — numbered names: ``Room 101``, ``vol-7``, ``INC-4471``.

Precision and recall on the hand-labelled sample (``tests/data/entities_labelled.json``: the
set the rules were tuned on, a held-out set of LoCoMo turns, and issue 26's first-use
sentences kept apart from both) are printed by ``benchmarks/entities_labelled.py``, figures
in ``benchmarks/results/entities_labelled.txt``; ``tests/entities/test_extractor_precision.py``
holds the floors.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

SPEAKER_KEYS = ("speaker", "author", "user", "from", "sender")

# Capitalised words that are not names on their own: pronouns, determiners, interjections,
# days, months, sentence starters common in chat and ops text.
STOP_WORDS = frozenset("""
i i'm i've i'll i'd me my mine we us our you your yours he him his she her hers it its they
them their this that these those there here what which who whom whose when where why how
a an the and or but nor so yet for of in on at to from by with about as into onto over under
if then than else also too very just only even still really actually maybe perhaps please
yes no not ok okay oh ah hey hi hello wow yeah yep nope thanks thank sorry sure cool great
nice awesome lol haha omg btw fyi asap am pm tbh imo
monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday tonight
january february march april may june july august september october november december
jan feb mar apr jun jul aug sep sept oct nov dec mon tue wed thu fri sat sun
is are was were be been being do does did have has had can could will would should shall
might must let lets let's it's that's there's what's i'd you're we're they're he's she's
all any some every each both either neither many much more most few other another such
one two three four five six seven eight nine ten first second third last next
good bad big small little best better well fine glad happy love like good-bye bye
after before during while since until because although though however therefore anyway
speaking talking going doing being getting having making taking looking thinking
god mom dad mum grandma grandpa sir madam mr mrs ms dr
congrats congratulations absolutely definitely totally seriously honestly sounds looks guess
ask tell check see call ping mail email send note update
agreed plus besides indeed exactly true right nah hmm umm aww awww yay whoa
english
""".split())
ACRONYM_STOP = frozenset({"I", "OK", "LOL", "OMG", "BTW", "FYI", "ASAP", "AM", "PM", "TBH", "IMO",
                          "TV", "ID", "OH", "UK", "US", "A", "SO", "NO", "YES", "WOW", "HAHA",
                          "THE", "AND", "DIY", "ETA", "FAQ", "XD", "GG", "IT", "IS", "MY", "ME"})
# A lone capitalised word opening a sentence (or the text after a speaker label) is a name
# when what follows says so (issue 26: "Priya said…", "Marisol: Tigran from procurement…",
# "Ingrid and Farah will…"); the words below never are. (A possessive is no sign: in chat
# "Yoga's been…", "Music's amazing" are contractions; on LoCoMo it took 13 such words for 7
# names.)
REPORTING_VERBS = frozenset("""
said says told tells asked asks mentioned met meets wrote writes emailed texted called replied
thinks thought wants wanted agreed agrees confirmed confirms promised promises suggested
explained added noted keeps kept insisted insists admitted admits warned reported
""".split())  # (no -s forms that are also plural nouns: "Release notes", "Sales reports")
NOT_PEOPLE = frozenset("""
everyone everybody someone somebody nobody noone anyone anybody people everything something
nothing anything none others folks guys apart aside away far data news word words straight
fresh direct life world nature summer winter spring autumn fall year week month children
mother father brother sister friend friends team staff management alert message email mail
ticket request report invoice call letter quote excerpt feedback reply response notice memo
order delivery shipment package backup traffic text page support help advice love
""".split())
# common-noun endings: "Doctors said", "Accomplishment keeps"
_NOUN_ENDINGS = ("ing", "ed", "ly", "ers", "ors", "ents", "ists", "ians", "ies", "ment",
                 "tion", "sion", "ness", "ity")
# "Tips: …", "Warning: …": a heading with its text on the same line, not a speaker
HEADING_WORDS = frozenset("""
tips tip note notes warning warnings caution important summary update updates todo example
examples answer question result results status reason fix error info hint tldr ps edit step
steps usage description details reminder remember attention fyi
""".split())
_CUE = re.compile(r"\s+(\w+)(?:\s+([\w'’]+))?")


def _person_cue(word: str, after: str) -> bool:
    """Whether the lone capitalised ``word`` opening a sentence is a name by what follows it
    (``after``: the text right after it): a reporting verb (``Priya said``), ``from`` and a
    lowercase word other than ``the`` (``Tigran from procurement``; not after a plural:
    ``Photos from``), or ``and`` and a capitalised word or ``I`` (``Ingrid and Farah``).
    :data:`NOT_PEOPLE`, heading words and common-noun endings (-ing, -ment, -ers…) never are."""
    low = word.casefold()
    if (len(word) < 3 or not word.isalpha() or low in NOT_PEOPLE or low in STOP_WORDS
            or low in HEADING_WORDS or low.endswith(_NOUN_ENDINGS)):
        return False
    m = _CUE.match(after)
    if not m:
        return False
    nxt, then = m.group(1), m.group(2) or ""
    if nxt in REPORTING_VERBS:
        return True
    if nxt == "from":  # not "Photos from", "Alert from PagerDuty", "Greetings from the Alps"
        return then[:1].islower() and then != "the" and not low.endswith("s")
    if nxt == "and":
        return then == "I" or (then[:1].isupper() and then.casefold() not in STOP_WORDS)
    return False


CONNECTORS = frozenset({"of", "the", "de", "da", "van", "von", "del", "la", "le", "&"})
NUMBER_WORD_STOP = STOP_WORDS | frozenset({"around", "about", "over", "under", "only", "page",
                                           "step", "top", "age", "aged", "at", "by", "in",
                                           "year", "years", "since", "until", "till"})

_WORD = r"[A-Z][a-zA-Z'’\-]*[a-zA-Z]|[A-Z]"
_CAP_RUN = re.compile(
    rf"(?<![\w@#.])(?:{_WORD})(?:\s+(?:(?:of|the|de|da|van|von|del|la|le|&)\s+)?(?:{_WORD}))*")
# An honorific's period is not a sentence end: "Dr. Smith", "Mrs. Okafor", "St. Louis" (the
# period split the run, and the lone name after it was then a sentence-initial word).
_HONORIFIC = re.compile(
    rf"(?<![\w@#.])(?:Dr|Mr|Mrs|Ms|Mx|Prof|Rev|St)\.\s+(?:{_WORD})(?:\s+(?:{_WORD}))*")
_PLACE_HONORIFICS = ("St.",)  # Saint: places as often as people
_SPEAKER = re.compile(r"^\s*([A-Z][\w'’.\-]*(?:\s[A-Z][\w'’.\-]*){0,2})\s?:[ \t]+(?=\S)", re.MULTILINE)
# (a turn: the name, a colon and words on the same line; "Tips:" ending its line is a heading)
_EMAIL = re.compile(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b")
_HANDLE = re.compile(r"(?<![\w.@])@([A-Za-z0-9_](?:[A-Za-z0-9_.\-]{0,37}[A-Za-z0-9_])?)")
_HASHTAG = re.compile(r"(?<![\w&#])#([A-Za-z][\w\-]{1,49})")
_NUMBERED = re.compile(
    r"(?<![\w\-])(?:([A-Z][A-Za-z]+) (\d{1,6}[A-Za-z]?)|([A-Z]{2,10}(?:-\d{1,8})+)"
    r"|([A-Za-z][a-z0-9]{1,15}(?:-[a-z][a-z0-9]*)*-\d{1,6}[a-z]?))(?![\w\-])")
_SNAKE = re.compile(r"(?<![\w.])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w])")
_CAMEL = re.compile(r"(?<![\w.])(?:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[a-z]+[A-Z][A-Za-z0-9]*)(?![\w])")
_DOTTED = re.compile(r"(?<![\w.@/])[A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)+(?![\w@])")
_ACRONYM = re.compile(r"(?<![\w@#\-])[A-Z]{2,6}s?(?![\w\-])")
_QUOTED = re.compile(r"[\"“]([^\"“”\n]{2,80})[\"”]")
_URL = re.compile(r"https?://\S+|www\.\S+")
_SENTENCE_END = re.compile(r"[.!?:…]\s*$|^\s*$|[\n(\[\"“']\s*$")
_DOTTED_STOP = frozenset({"e.g", "i.e", "a.m", "p.m", "etc", "vs", "u.s", "u.k", "mr", "mrs", "dr"})


@dataclass(frozen=True)
class Mention:
    """One entity named in a text: ``surface`` as written, ``normalized`` its matching key
    (:func:`normalize`), ``entity_type`` one of person, name, acronym, title, handle, email,
    hashtag, identifier, numbered."""

    surface: str
    normalized: str
    entity_type: str


def normalize(surface: str, entity_type: str = "name") -> str:
    """The matching key of a name: NFKC, casefolded, whitespace collapsed; for names (not
    emails, handles, hashtags, identifiers) a trailing possessive ``'s`` is dropped and
    punctuation becomes a space (``INC-4471`` → ``inc 4471``, ``Dr. Lee`` → ``dr lee``).
    Raises nothing; may return ``""`` for a name of punctuation only."""
    s = unicodedata.normalize("NFKC", surface).replace("’", "'").casefold().strip()
    if entity_type in ("email", "handle", "hashtag", "identifier"):
        return re.sub(r"\s+", " ", s)
    s = re.sub(r"'s$|'s(?=\s)", "", s)
    s = re.sub(r"[^\w&+]+", " ", s).replace("_", " ")
    return re.sub(r"\s+", " ", s).strip()


# A line's opening before its first word: bullets, numbering, quote and heading marks, bold.
_LINE_OPENING = re.compile(r"^\s*(?:[-*•+>#]+|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)])?\s*(?:\*\*|__|\*|_)?\s*$")


def _sentence_initial(text: str, start: int) -> bool:
    """Whether the word at ``start`` opens a sentence: after ``.!?:…``, a bracket or quote,
    at the start of the text or of a line, or after a list or heading marker at the start of
    a line (``- Remember …``, ``2) Start …``, ``**Tips**``)."""
    if start == 0 or _SENTENCE_END.search(text[max(0, start - 3):start]):
        return True
    line_start = text.rfind("\n", 0, start) + 1
    return start - line_start <= 12 and bool(_LINE_OPENING.match(text[line_start:start]))


def _strip_stop(words: list[str]) -> list[str]:
    while words and (words[0].casefold().strip("'’") in STOP_WORDS or words[0].casefold() in CONNECTORS
                     or (len(words) > 1 and words[0].casefold().endswith("ly"))):
        words = words[1:]
    while words and (words[-1].casefold() in CONNECTORS or words[-1] == "I"):
        words = words[:-1]
    return words


def extract(text: str, metadata: Mapping | None = None) -> list[Mention]:
    """Entities named in ``text`` (and the speaker in ``metadata``), in first-seen order, one
    per normalized name. Pure and fast (regular expressions only); raises nothing."""
    found: dict[str, Mention] = {}
    taken: list[tuple[int, int]] = []  # spans already claimed by a more specific pattern

    def add(surface: str, etype: str, span: tuple[int, int] | None = None) -> None:
        surface = surface.strip().strip(".,;:!?'’\"")
        norm = normalize(surface, etype)
        if len(norm) < 2 or norm in STOP_WORDS:
            return
        if span is not None:
            taken.append(span)
        found.setdefault(norm, Mention(surface, norm, etype))

    def free(a: int, b: int) -> bool:
        return all(b <= s or a >= e for s, e in taken)

    for key in SPEAKER_KEYS:
        value = (metadata or {}).get(key)
        if isinstance(value, str) and 0 < len(value) <= 80:
            add(value, "person")
    body = _URL.sub(lambda m: " " * len(m.group()), text)
    for m in _SPEAKER.finditer(body):
        if m.group(1).casefold() not in STOP_WORDS | HEADING_WORDS:
            add(m.group(1), "person", m.span(1))
    for m in _EMAIL.finditer(body):
        add(m.group(), "email", m.span())
    for m in _HANDLE.finditer(body):
        if free(*m.span()):
            add("@" + m.group(1), "handle", m.span())
    for m in _HASHTAG.finditer(body):
        add("#" + m.group(1), "hashtag", m.span())
    for m in _NUMBERED.finditer(body):
        if not free(*m.span()):
            continue
        if m.group(1):
            if m.group(1).casefold() in NUMBER_WORD_STOP:
                continue
            if _sentence_initial(body, m.start()) and not m.group(1).istitle():
                continue
        add(m.group(), "numbered", m.span())
    for pattern in (_SNAKE, _CAMEL, _DOTTED):
        for m in pattern.finditer(body):
            s = m.group()
            if not free(*m.span()) or s.casefold() in _DOTTED_STOP or len(s) < 4:
                continue
            if pattern is _DOTTED and (s.count(".") == 1 and len(s.split(".")[1]) == 1):
                continue
            add(s, "identifier", m.span())
    for m in _QUOTED.finditer(body):
        inner = m.group(1).strip()
        words = inner.split()
        if not (1 <= len(words) <= 6) or not inner[0].isupper() or inner[-1] in ".!?,;:":
            continue
        caps = sum(w[0].isupper() or w.casefold() in CONNECTORS for w in words)
        if caps == len(words) and not (len(words) == 1 and inner.casefold() in STOP_WORDS):
            add(inner, "title", m.span(1))
    for m in _ACRONYM.finditer(body):
        s = m.group().rstrip("s") if m.group().endswith("s") and m.group()[:-1].isupper() else m.group()
        if free(*m.span()) and s not in ACRONYM_STOP and len(s) >= 2:
            add(s, "acronym", m.span())
    for m in _HONORIFIC.finditer(body):
        if free(*m.span()):
            add(m.group(), "name" if m.group().startswith(_PLACE_HONORIFICS) else "person",
                m.span())
    for m in _CAP_RUN.finditer(body):
        if not free(*m.span()):
            continue
        words = m.group().split()
        initial = _sentence_initial(body, m.start())
        if words and words[0].isupper() and len(words[0]) > 1:
            continue  # shouting or an acronym run, handled above
        kept = _strip_stop(words)
        if not kept:
            continue
        if len(kept) == 1:
            word = kept[0].casefold()
            vocative = (body[m.end():m.end() + 1] == "," and len(word) >= 3
                        and not word.endswith("ly") and not re.search(r"(.)\1\1", word))
            if (initial and kept[0] == words[0] and not vocative
                    and not _person_cue(kept[0], body[m.end():m.end() + 60])):
                continue  # a lone capitalised word starting a sentence, nothing says a name
            if kept[0].isupper():
                continue
        add(" ".join(kept), "name", m.span())
    return list(found.values())
