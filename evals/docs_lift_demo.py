"""Docs-lift demo: tasks on a made-up file format that only its documentation explains.

The format is the Quill ledger (`.qlg`), read by an equally made-up tool, `quillc`. Its
docs bundle lives in `evals/docs/docs_lift_demo/`; in a docs-lift job it reaches the agent
in the `<docs>` section of its system prompt, never through this module. In brief:

    %QUILL 2 EUR                                   header: version 2, then the currency
    # a comment                                    comments start with '#'
    ~ 2024.061 assets/bank +250000 'Salary March'  date as YEAR.DAY-OF-YEAR, account,
    ~ 2024.065 expenses/food -1250 'Bob^'s bakery' signed amount in minor units, memo in
    .end 2 53                                      single quotes ('^' escapes ' and ^)

Records are sorted by date, then account; the trailer holds the record count and the
check (sum of position x amount) mod 97, two digits. quillc's config file `quillc.cfg`
has its own syntax (`!quillc 3`, `[[section]]`, `key := value`, booleans on/off).

None of this can be guessed, so each case measures whether the agent used the docs:
writing a ledger from a table (EUR, and JPY with no minor unit), converting a CSV export,
repairing a rejected file, adding the missing trailer, inserting a record in order and
writing a config for stated requirements. Judges parse what the agent left with a strict
validator written below (not a hard-coded answer), so any ledger that follows the rules
passes. The `informed` script writes the right answer only when the docs are in its
system prompt and a plausible guess otherwise, so a faux job shows a real lift.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from sandbox import faux
from sandbox.conversation import ModelRequest
from sandbox.suite import AgentRun, Case, Judge

# bash too: with the docs, a capable agent computes the checksum with python3 rather than
# by hand, so the with_docs arm measures knowing the format, not mental arithmetic.
TOOLS = ("read", "write", "edit", "ls", "find", "grep", "bash")

# ----- the Quill ledger format (what the docs specify) ----------------------------------

# Digits after the decimal point of each supported currency: amounts are written in these
# minor units, so 12.50 EUR is 1250 and 1,280 JPY is 1280.
CURRENCIES: dict[str, int] = {"EUR": 2, "USD": 2, "GBP": 2, "CHF": 2, "JPY": 0, "KWD": 3}
CHECK_MODULUS = 97
MAX_MEMO_CHARS = 80

_HEADER = re.compile(r"%QUILL 2 ([A-Z]{3})")
_RECORD = re.compile(
    r"~ (?P<year>\d{4})\.(?P<day>\d{3})"
    r" (?P<account>[a-z][a-z0-9-]*(?:/[a-z][a-z0-9-]*)*)"
    r" (?P<amount>[+-][1-9][0-9]*)"
    r" '(?P<memo>(?:[^'^\t]|\^['^])*)'"
)
_TRAILER = re.compile(r"\.end (0|[1-9][0-9]*) ([0-9]{2})")


class LedgerError(ValueError):
    """A rule of the format is broken; the message starts with quillc's error code."""


@dataclass(frozen=True)
class Record:
    day: date
    account: str
    amount: int  # signed, in minor units
    memo: str  # decoded: no escapes


@dataclass(frozen=True)
class Ledger:
    currency: str
    records: tuple[Record, ...]


def ordinal(day: date) -> str:
    return f"{day.year:04d}.{day.timetuple().tm_yday:03d}"


def escape_memo(memo: str) -> str:
    # The caret first, or the carets added for quotes would be doubled too.
    return memo.replace("^", "^^").replace("'", "^'")


def check_value(records: Sequence[Record]) -> int:
    # Python's % is already the non-negative remainder the docs ask for.
    return sum(i * r.amount for i, r in enumerate(records, start=1)) % CHECK_MODULUS


def record_line(record: Record) -> str:
    memo = escape_memo(record.memo)
    return f"~ {ordinal(record.day)} {record.account} {record.amount:+d} '{memo}'"


def trailer_line(records: Sequence[Record]) -> str:
    return f".end {len(records)} {check_value(records):02d}"


def sort_records(records: Sequence[Record]) -> list[Record]:
    # Stable, so records with the same date and account keep the order they were given in.
    return sorted(records, key=lambda r: (r.day, r.account))


def render_ledger(currency: str, records: Sequence[Record], comments: Sequence[str] = ()) -> str:
    """A valid ledger: header, comment lines, the records in order, the trailer."""
    ordered = sort_records(records)
    lines = [f"%QUILL 2 {currency}", *comments, *map(record_line, ordered), trailer_line(ordered)]
    return "\n".join(lines) + "\n"


def _parse_date(year: str, day: str, where: str) -> date:
    if not 1900 <= int(year) <= 2999:
        raise LedgerError(f"Q105 {where}: year {year} is outside 1900-2999")
    first = date(int(year), 1, 1)
    length = (date(int(year) + 1, 1, 1) - first).days
    if not 1 <= int(day) <= length:
        raise LedgerError(f"Q105 {where}: day {day} does not exist in {year}")
    return first + timedelta(days=int(day) - 1)


def parse_ledger(text: str) -> Ledger:
    """The ledger `text` holds, or LedgerError naming the first rule it breaks."""
    if text.endswith("\n"):  # the final newline ends the trailer; it adds no line
        text = text[:-1]
    lines = text.split("\n")
    header = _HEADER.fullmatch(lines[0])
    if header is None:
        raise LedgerError(f"Q101 line 1: expected '%QUILL 2 CUR', got {lines[0][:60]!r}")
    currency = header.group(1)
    if currency not in CURRENCIES:
        raise LedgerError(f"Q104 line 1: unsupported currency {currency}")
    records: list[Record] = []
    trailer: re.Match[str] | None = None
    for number, line in enumerate(lines[1:], start=2):
        where = f"line {number}"
        if trailer is not None:
            raise LedgerError(f"Q111 {where}: nothing may follow the .end trailer")
        if not line.strip() or line != line.rstrip():
            raise LedgerError(f"Q102 {where}: blank line or trailing whitespace")
        if line.startswith("#"):
            continue
        if line.startswith(".end"):
            trailer = _TRAILER.fullmatch(line)
            if trailer is None:
                raise LedgerError(f"Q109 {where}: malformed trailer {line[:60]!r}")
            continue
        match = _RECORD.fullmatch(line)
        if match is None:
            raise LedgerError(f"Q103 {where}: malformed record {line[:80]!r}")
        memo = re.sub(r"\^(['^])", r"\1", match["memo"])
        if len(memo) > MAX_MEMO_CHARS:
            raise LedgerError(f"Q107 {where}: memo longer than {MAX_MEMO_CHARS} characters")
        record = Record(
            _parse_date(match["year"], match["day"], where),
            match["account"],
            int(match["amount"]),
            memo,
        )
        if records and (record.day, record.account) < (records[-1].day, records[-1].account):
            raise LedgerError(f"Q108 {where}: record out of order (date, then account)")
        records.append(record)
    if trailer is None:
        raise LedgerError("Q110: the .end trailer is missing")
    count, check = int(trailer.group(1)), int(trailer.group(2))
    if count != len(records):
        raise LedgerError(f"Q109: trailer counts {count} records, the file has {len(records)}")
    if check != check_value(records):
        raise LedgerError(f"Q109: trailer check {check:02d} is wrong")
    return Ledger(currency, tuple(records))


# ----- quillc.cfg (what the docs specify) ----------------------------------------------

CONFIG_MAGIC = "!quillc 3"
_SECTION = re.compile(r"\[\[([a-z]+)\]\]")
_ENTRY = re.compile(r"([a-z][a-z-]*)\s*:=\s*(.*?)\s*")
_DIRECTORY = re.compile(r"(?:[A-Za-z0-9_.-]+/)+")


class ConfigError(ValueError):
    pass


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in allowed:
            raise ConfigError(f"E-CFG-4: {value!r} is not one of {', '.join(allowed)}")
        return value

    return parse


def _directory(value: str) -> str:
    if _DIRECTORY.fullmatch(value) is None or ".." in value.split("/"):
        raise ConfigError(f"E-CFG-4: {value!r} is not a relative directory ending in '/'")
    return value.removeprefix("./") or "./"


def _glob(value: str) -> str:
    if not value or "/" in value:
        raise ConfigError(f"E-CFG-4: {value!r} is not a file-name pattern")
    return value


def _switch(value: str) -> bool:
    if value not in ("on", "off"):
        raise ConfigError(f"E-CFG-4: switches are 'on' or 'off', not {value!r}")
    return value == "on"


def _records_limit(value: str) -> int:
    if re.fullmatch(r"[1-9][0-9]*", value) is None or int(value) > 100_000:
        raise ConfigError(f"E-CFG-4: max-records must be 1 to 100000, not {value!r}")
    return int(value)


@dataclass(frozen=True)
class _Key:
    parse: Callable[[str], object]
    default: object = None  # None: the key is required when its section is present


_REQUIRED_SECTIONS = ("ledger",)
CONFIG_SCHEMA: dict[str, dict[str, _Key]] = {
    "ledger": {"currency": _Key(_choice(*CURRENCIES)), "root": _Key(_directory, "./")},
    "ingest": {
        "from": _Key(_directory),
        "glob": _Key(_glob, "*.qlg"),
        "on-error": _Key(_choice("reject", "skip-record", "quarantine"), "reject"),
        "quarantine-dir": _Key(_directory, ""),
    },
    "verify": {
        "trailer": _Key(_choice("require", "warn", "ignore"), "require"),
        "max-records": _Key(_records_limit, 10_000),
        "comments": _Key(_switch, True),
    },
    "export": {
        "to": _Key(_directory),
        "format": _Key(_choice("qlg", "tsv", "jsonl"), "qlg"),
        "dates": _Key(_choice("ordinal", "iso"), "ordinal"),
        "amounts": _Key(_choice("minor", "decimal"), "minor"),
    },
}


def parse_config(text: str) -> dict[str, dict[str, object]]:
    """The effective settings (defaults filled in) by section, or ConfigError."""
    lines = text.split("\n")
    if lines[0].rstrip() != CONFIG_MAGIC:
        raise ConfigError(f"E-CFG-1 line 1: the first line must be {CONFIG_MAGIC!r}")
    raw: dict[str, dict[str, str]] = {}
    section: str | None = None
    for number, line in enumerate(lines[1:], start=2):
        stripped = line.strip()
        if not stripped or stripped.startswith(";"):
            continue
        if (header := _SECTION.fullmatch(stripped)) is not None:
            section = header.group(1)
            if section not in CONFIG_SCHEMA:
                raise ConfigError(f"E-CFG-2 line {number}: unknown section [[{section}]]")
            if section in raw:
                raise ConfigError(f"E-CFG-3 line {number}: section [[{section}]] repeated")
            raw[section] = {}
            continue
        entry = _ENTRY.fullmatch(stripped)
        if entry is None or section is None:
            raise ConfigError(f"E-CFG-1 line {number}: expected 'key := value' in a section")
        key, value = entry.groups()
        if key not in CONFIG_SCHEMA[section]:
            raise ConfigError(f"E-CFG-2 line {number}: unknown key {key} in [[{section}]]")
        if key in raw[section]:
            raise ConfigError(f"E-CFG-3 line {number}: key {key} repeated")
        raw[section][key] = value
    for required in _REQUIRED_SECTIONS:
        if required not in raw:
            raise ConfigError(f"E-CFG-5: the [[{required}]] section is required")
    settings: dict[str, dict[str, object]] = {}
    for name, given in raw.items():
        values: dict[str, object] = {}
        for key, spec in CONFIG_SCHEMA[name].items():
            if key in given:
                values[key] = spec.parse(given[key])
            elif spec.default is None:
                raise ConfigError(f"E-CFG-5: [[{name}]] needs the key {key}")
            else:
                values[key] = spec.default
        settings[name] = values
    ingest = settings.get("ingest")
    quarantines = ingest is not None and ingest["on-error"] == "quarantine"
    if ingest is not None and quarantines != bool(ingest["quarantine-dir"]):
        raise ConfigError("E-CFG-6: quarantine-dir is set exactly when on-error is quarantine")
    return settings


# ----- judges --------------------------------------------------------------------------


def _read_ledger(run: AgentRun, path: str) -> tuple[Ledger | None, str]:
    text = run.read_file(path)
    if text is None:
        return None, f"{path} does not exist"
    try:
        return parse_ledger(text), "valid"
    except LedgerError as exc:
        return None, f"{path} is not a valid ledger: {exc}"


def ledger_valid(path: str) -> Judge:
    """quillc would accept the file: every syntax, order and trailer rule holds."""

    def check(run: AgentRun) -> tuple[float, str]:
        ledger, detail = _read_ledger(run, path)
        return (1.0, f"{path} is a valid ledger") if ledger else (0.0, detail)

    return Judge(name=f"ledger_valid({path})", fn=check)


def ledger_holds(path: str, currency: str, expected: Sequence[Record]) -> Judge:
    """The file is a valid ledger in `currency` holding exactly the `expected` records."""

    def key(record: Record) -> tuple[date, str, int, str]:
        return (record.day, record.account, record.amount, record.memo)

    def check(run: AgentRun) -> tuple[float, str]:
        ledger, detail = _read_ledger(run, path)
        if ledger is None:
            return 0.0, detail
        if ledger.currency != currency:
            return 0.0, f"currency is {ledger.currency}, expected {currency}"
        got, want = sorted(map(key, ledger.records)), sorted(map(key, expected))
        if got != want:
            missing = [w for w in want if w not in got]
            extra = [g for g in got if g not in want]
            return 0.0, f"records differ; missing {missing[:3]}, unexpected {extra[:3]}"
        return 1.0, f"all {len(want)} records present"

    return Judge(name=f"ledger_holds({path})", fn=check)


def unchanged_above_trailer(path: str, original: str) -> Judge:
    """Every line of `original` is still there, in place, before the trailer."""

    def check(run: AgentRun) -> tuple[float, str]:
        text = run.read_file(path)
        if text is None:
            return 0.0, f"{path} does not exist"
        kept = text.rstrip("\n").split("\n")[:-1]
        if kept != original.rstrip("\n").split("\n"):
            return 0.0, "lines other than the trailer were changed"
        return 1.0, "only the trailer was added"

    return Judge(name=f"unchanged_above_trailer({path})", fn=check)


def config_valid(path: str) -> Judge:
    def check(run: AgentRun) -> tuple[float, str]:
        text = run.read_file(path)
        if text is None:
            return 0.0, f"{path} does not exist"
        try:
            parse_config(text)
        except ConfigError as exc:
            return 0.0, f"quillc would refuse {path}: {exc}"
        return 1.0, f"{path} parses"

    return Judge(name=f"config_valid({path})", fn=check)


def config_settings(path: str, wanted: Mapping[str, Mapping[str, object]]) -> Judge:
    """The effective settings (explicit or default) match `wanted`, key by key."""

    def check(run: AgentRun) -> tuple[float, str]:
        text = run.read_file(path)
        if text is None:
            return 0.0, f"{path} does not exist"
        try:
            settings = parse_config(text)
        except ConfigError as exc:
            return 0.0, str(exc)
        wrong = [
            f"{section}.{key}={settings.get(section, {}).get(key)!r} (want {value!r})"
            for section, keys in wanted.items()
            for key, value in keys.items()
            if settings.get(section, {}).get(key) != value
        ]
        total = sum(len(keys) for keys in wanted.values())
        return (total - len(wrong)) / total, ("; ".join(wrong) if wrong else "all settings met")

    return Judge(name=f"config_settings({path})", fn=check)


# ----- faux scripts --------------------------------------------------------------------

IDLE = [faux.text("I looked at the task and I am done.")]
# A fact only the docs bundle states: the informed model "knows" the format only with it.
DOCS_FACT = "%QUILL 2"


def has_docs(request: ModelRequest) -> bool:
    return "<docs>" in request.system and DOCS_FACT in request.system


def informed(
    path: str, correct: str, guess: str, *, read_first: str | None = None
) -> list[faux.FauxStep]:
    """Writes `correct` when the docs are in the system prompt, else the plausible `guess`."""

    def write(request: ModelRequest) -> faux.FauxReply:
        return faux.call("write", path=path, content=correct if has_docs(request) else guess)

    steps: list[faux.FauxStep] = [faux.call("read", path=read_first)] if read_first else []
    return [*steps, write, faux.text(f"I wrote {path} in the Quill format.")]


def solution(path: str, content: str, *, read_first: str | None = None) -> list[faux.FauxStep]:
    steps: list[faux.FauxStep] = [faux.call("read", path=read_first)] if read_first else []
    return [*steps, faux.call("write", path=path, content=content), faux.text(f"Wrote {path}.")]


def guess_ledger(currency: str, records: Sequence[Record]) -> str:
    """What a model without the docs writes: a tidy, CSV-like file that quillc refuses."""
    exponent = CURRENCIES[currency]
    rows = [
        f'{r.day.isoformat()};{r.account};{Decimal(r.amount).scaleb(-exponent)};"{r.memo}"'
        for r in sort_records(records)
    ]
    total = Decimal(sum(r.amount for r in records)).scaleb(-exponent)
    return "\n".join([f"# Quill ledger ({currency})", *rows, f"# total: {total}"]) + "\n"


def _record(iso: str, account: str, amount: int, memo: str) -> Record:
    return Record(date.fromisoformat(iso), account, amount, memo)


def _table(currency: str, rows: Sequence[tuple[str, str, str, str]]) -> str:
    lines = [f"| date | account | amount ({currency}) | memo |", "|---|---|---|---|"]
    return "\n".join([*lines, *(f"| {' | '.join(row)} |" for row in rows)])


# ----- case: write a ledger from a table -----------------------------------------------

APRIL_ROWS = [
    ("2024-04-02", "expenses/food", "-18.40", "Market"),
    ("2024-04-01", "income/salary", "+2,450.00", "April salary"),
    ("2024-04-02", "expenses/books", "-12.99", "Pratchett's Mort"),
    ("2024-04-15", "expenses/rent", "-950.00", "Rent April"),
    ("2024-04-30", "assets/savings", "+300.00", "Monthly transfer"),
]
APRIL = [
    _record("2024-04-02", "expenses/food", -1840, "Market"),
    _record("2024-04-01", "income/salary", 245000, "April salary"),
    _record("2024-04-02", "expenses/books", -1299, "Pratchett's Mort"),
    _record("2024-04-15", "expenses/rent", -95000, "Rent April"),
    _record("2024-04-30", "assets/savings", 30000, "Monthly transfer"),
]

# ----- case: a yen ledger across New Year ------------------------------------------------

TOKYO_ROWS = [
    ("2024-01-02", "expenses/food", "-1,280", "Ramen"),
    ("2023-12-30", "expenses/hotel", "-18,500", "Hotel Sakura, 2 nights"),
    ("2024-01-01", "income/gift", "+10,000", "Otoshidama from Ken's aunt"),
    ("2023-12-31", "expenses/shrine", "-500", "Omamori ^_^"),
]
TOKYO = [
    _record("2024-01-02", "expenses/food", -1280, "Ramen"),
    _record("2023-12-30", "expenses/hotel", -18500, "Hotel Sakura, 2 nights"),
    _record("2024-01-01", "income/gift", 10000, "Otoshidama from Ken's aunt"),
    _record("2023-12-31", "expenses/shrine", -500, "Omamori ^_^"),
]

# ----- case: convert a CSV export -------------------------------------------------------

BANK_CSV = """date,account,amount,memo
2023-07-14,expenses/travel,-86.20,Train to Bob's
2023-03-01,income/salary,3100.00,March salary
2023-12-31,expenses/gifts,-45.00,"Gift, Ann"
2023-03-01,expenses/rent,-1200.00,Rent
2023-07-14,expenses/gifts,-12.00,Mug ^_^
2023-10-05,income/interest,0.42,Savings interest
2023-01-09,expenses/fees,-2.5,Card fee
"""


def records_from_csv(text: str, currency: str) -> list[Record]:
    """The CSV export's rows as records: decimal amounts become minor units."""
    exponent = CURRENCIES[currency]
    return [
        _record(
            row["date"],
            row["account"],
            int(Decimal(row["amount"]).scaleb(exponent)),
            row["memo"],
        )
        for row in csv.DictReader(io.StringIO(text))
    ]


BANK = records_from_csv(BANK_CSV, "USD")

# ----- case: repair a file quillc rejects ----------------------------------------------

# Six faults: a decimal amount, an unescaped quote, a blank line, a missing sign, records
# out of order, and a stale trailer (whose numbers mean nothing without the docs).
BROKEN = """%QUILL 2 EUR
# February
~ 2024.032 expenses/food -12.50 'Lunch'
~ 2024.031 expenses/travel -4500 'Taxi to Bob's'

~ 2024.035 income/refund 2000 'Deposit back'
~ 2024.033 expenses/food -830 'Groceries'
.end 4 12
"""
REPAIRED = [
    _record("2024-01-31", "expenses/travel", -4500, "Taxi to Bob's"),
    _record("2024-02-01", "expenses/food", -1250, "Lunch"),
    _record("2024-02-02", "expenses/food", -830, "Groceries"),
    _record("2024-02-04", "income/refund", 2000, "Deposit back"),
]


def guess_repair() -> str:
    # What the file itself lets a model infer (signs, minor units, order), with the two
    # rules it cannot: a backslash escape and a trailer kept as a plain count.
    lines = ["%QUILL 2 EUR", "# February"]
    for r in sort_records(REPAIRED):
        memo = r.memo.replace("'", "\\'")
        lines.append(f"~ {ordinal(r.day)} {r.account} {r.amount:+d} '{memo}'")
    return "\n".join([*lines, f".end {len(REPAIRED)} 12"]) + "\n"


# ----- case: add the missing trailer ---------------------------------------------------

# The weighted sum is negative, so only the documented non-negative remainder is right.
Q1_NO_TRAILER = """%QUILL 2 GBP
# Q1 2024, household
~ 2024.005 income/salary +180000 'January pay'
~ 2024.012 expenses/rent -95000 'Rent January'
# council tax is paid in ten instalments
~ 2024.020 expenses/tax -14250 'Council tax 1/10'
~ 2024.043 expenses/rent -95000 'Rent February'
~ 2024.071 expenses/rent -95000 'Rent March'
"""
Q1 = [
    _record("2024-01-05", "income/salary", 180000, "January pay"),
    _record("2024-01-12", "expenses/rent", -95000, "Rent January"),
    _record("2024-01-20", "expenses/tax", -14250, "Council tax 1/10"),
    _record("2024-02-12", "expenses/rent", -95000, "Rent February"),
    _record("2024-03-11", "expenses/rent", -95000, "Rent March"),
]


def guess_trailer() -> str:
    # Without the rule, a count and a plain total are the natural guess.
    total = sum(r.amount for r in Q1)
    return Q1_NO_TRAILER + f".end {len(Q1)} {total}\n"


# ----- case: insert a record where it belongs ------------------------------------------

MAY_HEADER_COMMENT = "# May 2024"
MAY = [
    _record("2024-05-01", "income/salary", 245000, "May salary"),
    _record("2024-05-02", "expenses/rent", -95000, "Rent May"),
    _record("2024-05-10", "expenses/books", -2399, "Atlas"),
    _record("2024-05-10", "income/gift", 5000, "Birthday from Ann"),
    _record("2024-05-19", "expenses/food", -4120, "Weekly shop"),
]
MAY_NEW = _record("2024-05-10", "expenses/food", -730, "Baker's dozen")
MAY_FILE = render_ledger("EUR", MAY, [MAY_HEADER_COMMENT])


def guess_insert() -> str:
    # Placed by date at the end of its day, with the old trailer's check left as it was.
    lines = MAY_FILE.rstrip("\n").split("\n")
    new_line = f"~ {ordinal(MAY_NEW.day)} {MAY_NEW.account} {MAY_NEW.amount:+d} 'Baker''s dozen'"
    lines.insert(lines.index(record_line(MAY[3])) + 1, new_line)
    lines[-1] = f".end {len(MAY) + 1} {check_value(MAY):02d}"
    return "\n".join(lines) + "\n"


# ----- case: write quillc's config ----------------------------------------------------

CONFIG_WANTED: dict[str, dict[str, object]] = {
    "ledger": {"currency": "CHF", "root": "books/"},
    "ingest": {
        "from": "inbox/",
        "glob": "*.qlg",
        "on-error": "quarantine",
        "quarantine-dir": "quarantine/",
    },
    "verify": {"trailer": "require", "max-records": 500, "comments": False},
    "export": {"to": "out/", "format": "jsonl", "dates": "iso", "amounts": "decimal"},
}
CONFIG = """!quillc 3
; Ledgers in Swiss francs, kept under books/.
[[ledger]]
currency := CHF
root := books/

[[ingest]]
from := inbox/
glob := *.qlg
on-error := quarantine
quarantine-dir := quarantine/

[[verify]]
trailer := require
max-records := 500
comments := off

[[export]]
to := out/
format := jsonl
dates := iso
amounts := decimal
"""
CONFIG_GUESS = """# quillc configuration
[ledger]
currency = "CHF"
root = "books/"

[ingest]
source = "inbox/"
pattern = "*.qlg"
on_error = "quarantine"
quarantine_dir = "quarantine/"

[verify]
require_checksum = true
max_records = 500
allow_comments = false

[export]
format = "jsonl"
dates = "iso"
amounts = "decimal"
output = "out/"
"""

# ----- the cases ------------------------------------------------------------------------

CASES = [
    Case(
        tools=TOOLS,
        id="write-ledger",
        input=(
            "Create books/april.qlg, a Quill ledger in EUR that quillc accepts, holding "
            "exactly these transactions:\n\n" + _table("EUR", APRIL_ROWS)
        ),
        judges=[ledger_valid("books/april.qlg"), ledger_holds("books/april.qlg", "EUR", APRIL)],
        metadata={"rules": ["header", "ordinal dates", "minor units", "escaping", "check"]},
        scripts={
            "solution": solution("books/april.qlg", render_ledger("EUR", APRIL)),
            "informed": informed(
                "books/april.qlg", render_ledger("EUR", APRIL), guess_ledger("EUR", APRIL)
            ),
            "idle": IDLE,
        },
    ),
    Case(
        tools=TOOLS,
        id="yen-ledger",
        input=(
            "Create books/tokyo.qlg, a Quill ledger in JPY that quillc accepts, holding "
            "exactly these transactions from a trip over New Year:\n\n" + _table("JPY", TOKYO_ROWS)
        ),
        judges=[ledger_valid("books/tokyo.qlg"), ledger_holds("books/tokyo.qlg", "JPY", TOKYO)],
        metadata={"rules": ["currency exponent", "ordinal dates", "caret escaping", "check"]},
        scripts={
            "solution": solution("books/tokyo.qlg", render_ledger("JPY", TOKYO)),
            "informed": informed(
                "books/tokyo.qlg", render_ledger("JPY", TOKYO), guess_ledger("JPY", TOKYO)
            ),
            "idle": IDLE,
        },
    ),
    Case(
        tools=TOOLS,
        id="convert-csv",
        input=(
            "exports/bank-2023.csv is our bank's export (amounts in USD). Convert it into "
            "books/bank-2023.qlg, a Quill ledger in USD holding the same transactions, "
            "that quillc accepts."
        ),
        files={"exports/bank-2023.csv": BANK_CSV},
        judges=[
            ledger_valid("books/bank-2023.qlg"),
            ledger_holds("books/bank-2023.qlg", "USD", BANK),
        ],
        metadata={"rules": ["minor units", "ordinal dates", "escaping", "order", "check"]},
        scripts={
            "solution": solution(
                "books/bank-2023.qlg",
                render_ledger("USD", BANK),
                read_first="exports/bank-2023.csv",
            ),
            "informed": informed(
                "books/bank-2023.qlg",
                render_ledger("USD", BANK),
                guess_ledger("USD", BANK),
                read_first="exports/bank-2023.csv",
            ),
            "idle": IDLE,
        },
    ),
    Case(
        tools=TOOLS,
        id="fix-ledger",
        input=(
            "quillc rejects books/broken.qlg. Repair the file in place so that quillc accepts "
            "it and it still holds the same transactions."
        ),
        files={"books/broken.qlg": BROKEN},
        judges=[
            ledger_valid("books/broken.qlg"),
            ledger_holds("books/broken.qlg", "EUR", REPAIRED),
        ],
        metadata={"rules": ["minor units", "sign", "escaping", "blank lines", "order", "check"]},
        scripts={
            "solution": solution(
                "books/broken.qlg",
                render_ledger("EUR", REPAIRED, ["# February"]),
                read_first="books/broken.qlg",
            ),
            "informed": informed(
                "books/broken.qlg",
                render_ledger("EUR", REPAIRED, ["# February"]),
                guess_repair(),
                read_first="books/broken.qlg",
            ),
            "idle": IDLE,
        },
    ),
    Case(
        tools=TOOLS,
        id="add-trailer",
        input=(
            "quillc reports Q110 (missing trailer) for books/q1.qlg. Add the missing trailer "
            "line and change nothing else in the file."
        ),
        files={"books/q1.qlg": Q1_NO_TRAILER},
        judges=[
            ledger_valid("books/q1.qlg"),
            ledger_holds("books/q1.qlg", "GBP", Q1),
            unchanged_above_trailer("books/q1.qlg", Q1_NO_TRAILER),
        ],
        metadata={"rules": ["trailer", "check", "non-negative remainder"]},
        scripts={
            "solution": solution(
                "books/q1.qlg", Q1_NO_TRAILER + trailer_line(Q1) + "\n", read_first="books/q1.qlg"
            ),
            "informed": informed(
                "books/q1.qlg",
                Q1_NO_TRAILER + trailer_line(Q1) + "\n",
                guess_trailer(),
                read_first="books/q1.qlg",
            ),
            "idle": IDLE,
        },
    ),
    Case(
        tools=TOOLS,
        id="insert-record",
        input=(
            "Add this transaction to books/may.qlg and keep the file valid for quillc: "
            "10 May 2024, account expenses/food, -7.30 EUR, memo: Baker's dozen"
        ),
        files={"books/may.qlg": MAY_FILE},
        judges=[
            ledger_valid("books/may.qlg"),
            ledger_holds("books/may.qlg", "EUR", [*MAY, MAY_NEW]),
        ],
        metadata={"rules": ["order by date then account", "escaping", "check"]},
        scripts={
            "solution": solution(
                "books/may.qlg",
                render_ledger("EUR", [*MAY, MAY_NEW], [MAY_HEADER_COMMENT]),
                read_first="books/may.qlg",
            ),
            "informed": informed(
                "books/may.qlg",
                render_ledger("EUR", [*MAY, MAY_NEW], [MAY_HEADER_COMMENT]),
                guess_insert(),
                read_first="books/may.qlg",
            ),
            "idle": IDLE,
        },
    ),
    Case(
        tools=TOOLS,
        id="write-config",
        input=(
            "Write quillc.cfg in the workspace root so that quillc:\n"
            "- keeps its ledgers under books/, in Swiss francs;\n"
            "- ingests every .qlg file from inbox/; a record that fails the checks is set "
            "aside into quarantine/ while the rest of its file is still ingested;\n"
            "- refuses any file without a correct trailer, with more than 500 records, or "
            "with comment lines;\n"
            "- exports to out/ as JSON lines, with ISO dates and decimal amounts."
        ),
        judges=[config_valid("quillc.cfg"), config_settings("quillc.cfg", CONFIG_WANTED)],
        metadata={"rules": ["config syntax", "config keys", "defaults"]},
        scripts={
            "solution": solution("quillc.cfg", CONFIG),
            "informed": informed("quillc.cfg", CONFIG, CONFIG_GUESS),
            "idle": IDLE,
        },
    ),
]
