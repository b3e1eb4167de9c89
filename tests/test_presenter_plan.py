"""The presenter's compiled paths give what the general path gives: the dict schema (`mcpfusion.dictschema`),
embeds the parent's own validation already made (trusted keys), the flat plan, and its fallbacks."""

import datetime as dt
import enum
import json
import re
from decimal import Decimal
from typing import Annotated, Any, Literal

import pytest
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    computed_field,
    field_validator,
    model_validator,
)

from mcpfusion import Model, Presenter, suggest, ui
from mcpfusion.dictschema import codec, dump
from mcpfusion.presenter import PresenterError
from mcpfusion.redaction import _steps_path, parse_path
from mcpfusion.stripping import stripping_model


class Ref(BaseModel):
    id: str
    name: str
    phone: str | None = None


class Row(BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True)

    id: str
    ref: Ref | None = None
    total: int = 0
    price: Decimal = Decimal("0")
    when: dt.date
    tags: list[str] = Field(default_factory=list)
    status: Literal["a", "b"] = "a"
    note: str | None = Field(None, max_length=5)


ROW = {"id": " r1 ", "ref": {"id": "c1", "name": "Ada", "extra": 1}, "total": "12", "price": "1.50",
       "when": "2026-01-02", "tags": ["x"], "undeclared": "strip me"}


def _model_dump(model: type[BaseModel], raw: Any) -> Any:
    return model.__pydantic_serializer__.to_python(
        model.__pydantic_validator__.validate_python(raw, from_attributes=True), mode="json")


@pytest.mark.parametrize("raw", [ROW, {**ROW, "ref": None}, {"id": "r2", "when": dt.date(2026, 3, 4)},
                                 {**ROW, "note": "abc", "status": "b", "total": 3}])
def test_dict_schema_validates_strips_and_dumps_as_the_model(raw):
    model = Model(Row, casts={"total": "int"}, hidden=["tags"]).schema
    lean = codec(model)
    assert lean is not None
    validator, serializer, _ = lean
    out = serializer.to_python(validator.validate_python(raw), mode="json")
    expected = _model_dump(model, raw)
    assert out == expected and list(out) == list(expected)
    many = codec(model, many=True)
    assert many is not None
    assert many[1].to_python(many[0].validate_python([raw, raw]), mode="json") == [expected, expected]


class WithComputed(BaseModel):
    a: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def b(self) -> int:
        return self.a * 2


class WithAlias(BaseModel):
    a: int = Field(alias="A")


class WithModelValidator(BaseModel):
    a: int

    @model_validator(mode="before")
    @classmethod
    def fill(cls, data: Any) -> Any:
        return data


class WithInfoValidator(BaseModel):
    a: int

    @field_validator("a")
    @classmethod
    def check(cls, value: int, info: Any) -> int:
        return value


class KeepsExtra(BaseModel):
    model_config = ConfigDict(extra="allow")
    a: int


class Other(BaseModel):
    x: int


class UnionOfModels(BaseModel):
    a: Ref | Other


class Excluded(BaseModel):
    a: int
    b: int = Field(0, exclude=True)


@pytest.mark.parametrize("model", [WithComputed, WithAlias, WithModelValidator, WithInfoValidator, KeepsExtra,
                                   UnionOfModels, Excluded])
def test_models_a_dict_schema_could_tell_apart_keep_the_model(model):
    assert codec(model) is None


def test_presenter_output_is_the_models_on_every_input_kind():
    """Dicts take the dict schema; attribute objects, model instances and refused dicts take the model: the
    same result, and the model's own error."""
    presenter = Presenter("Row").schema(Model(Row, casts={"total": "int"}))
    general = _model_dump(presenter.item_model, ROW)
    assert presenter.present(ROW).view.data == general

    class Obj:
        def __init__(self, **values: Any) -> None:
            self.__dict__.update(values)

    assert presenter.present(Obj(**ROW)).view.data == general
    assert presenter.present({**ROW, "ref": Ref(id="c1", name="Ada")}).view.data == general
    with pytest.raises(PresenterError, match=r"\(when\)"):
        presenter.present({**ROW, "when": "not a date"})
    rows = presenter.present([ROW, {**ROW, "when": "nope"}, Obj(**ROW)])
    assert rows.view.data == [general, general]
    assert "1 of 3 item(s) could not be shown" in rows.text


class Line(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sku: str
    qty: int = 1
    card: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def twice(self) -> int:
        return self.qty * 2


class Bill(BaseModel):
    id: str
    email: str
    lines: list[Line] = Field(min_length=1)


def _line_presenter() -> Presenter:
    return Presenter("Line").schema(Line).redact_pii(["card"]).rules(["Line rule."])


def _bill_presenter(model: Any = Bill) -> Presenter:
    return (Presenter("Bill").schema(model).rules(["Bill rule."]).redact_pii(["email"])
            .ui(lambda b: ui.table(["Id", "Lines"], [[b["id"], len(b["lines"])]]))
            .suggest(lambda b: [suggest("bill.pay", "Pay it"), None]).embed("lines", _line_presenter()))


BILL = {"id": "b1", "email": "ada@example.com",
        "lines": [{"sku": "A", "qty": 2, "card": "4111 1111"}, {"sku": "B"}]}


def _general(presenter: Presenter) -> Presenter:
    """The same presenter on the general path: no plan, no trusted key."""
    general = presenter.copy()
    general.freeze()
    general._cache.plan = None
    general._cache.trusted = frozenset()
    return general


def test_an_embed_the_parent_declares_with_the_childs_model_is_validated_once():
    bill = _bill_presenter().freeze()
    general = _general(bill).present(BILL)
    assert bill._cache.trusted == {"lines"} and bill._cache.plan is not None

    def second_validation(*args: Any) -> Any:
        raise AssertionError("the lines were validated twice")

    child = bill.embeds["lines"]
    object.__setattr__(child, "_dump_many", second_validation)
    object.__setattr__(child, "_dump_one", second_validation)
    flat = bill.present(BILL)
    assert flat.texts == general.texts and flat.view.data == general.view.data
    assert flat.view.data["lines"][0] == {"sku": "A", "qty": 2, "card": "[REDACTED]", "twice": 4}
    assert "4111 1111" not in flat.text and "ada@example.com" not in flat.text
    assert flat.texts[-2].count("Line rule.") == 1
    # What the parent refuses (an extra key its line model forbids) is refused as before.
    with pytest.raises(PresenterError):
        bill.present({**BILL, "lines": [{"sku": "A", "extra": 1}]})


def _cast_sku(value: Any) -> Any:
    return str(value).upper()


class CastBill(BaseModel):
    id: str
    email: str
    lines: Annotated[list[Line], BeforeValidator(lambda v: [{**li, "sku": _cast_sku(li["sku"])} for li in v])]


class LooseLine(BaseModel):
    model_config = ConfigDict(extra="allow")
    sku: str


class LooseBill(BaseModel):
    id: str
    email: str
    lines: list[LooseLine]


def test_an_embed_the_parent_may_rewrite_or_shape_otherwise_is_validated_by_the_child():
    cast = _bill_presenter(CastBill).freeze()
    assert cast._cache.trusted == frozenset()
    lowered = {**BILL, "lines": [{"sku": "a"}]}
    assert cast.present(lowered).view.data["lines"] == [{"sku": "a", "qty": 1, "card": "[REDACTED]", "twice": 2}]
    # A nested model keeping extra keys is validated as one ignoring them (`stripping`), by parent and child
    # alike: the same fields either way, so the parent's validation serves the child, and nothing extra leaves.
    loose = (Presenter("Bill").schema(LooseBill).embed("lines", Presenter("L").schema(LooseLine))).freeze()
    assert loose._cache.trusted == frozenset({"lines"})
    assert loose.present({**BILL, "lines": [{"sku": "a", "card": "4111"}]}).view.data["lines"] == [{"sku": "a"}]
    other = Presenter("Bill").schema(Bill).embed("lines", Presenter("L").schema({"sku": str})).freeze()
    assert other._cache.trusted == frozenset()


def test_the_flat_plan_falls_back_to_the_general_path_on_data_it_does_not_take():
    """A list embed with a bad item degrades item by item, a bad single embed raises, a tuple embed and an
    absent one render: all exactly as the general path does."""
    lines = Presenter("Line").schema({"sku": str, "card": str | None}).redact_pii(["card"]).rules(["Line rule."])
    bill = (Presenter("Bill").schema({"id": str, "email": str}).rules(["Bill rule."]).redact_pii(["email"])
            .ui(lambda b: ui.summary(b["id"])).embed("lines", lines))
    general = _general(bill)
    cases = [
        {**BILL, "lines": [{"sku": "A", "card": "4111 1111"}, {"card": "x"}]},
        {**BILL, "lines": ({"sku": "A", "card": "4111 1111"},)},
        {"id": "b1", "email": "ada@example.com"},
        {**BILL, "lines": {"sku": "A", "card": None}},
    ]
    for raw in cases:
        ours, theirs = bill.present(raw), general.present(raw)
        assert ours.texts == theirs.texts and ours.view.data == theirs.view.data
    assert "could not be shown" in bill.present(cases[0]).text
    assert "Line rule." not in bill.present(cases[2]).text  # no child, no child rules
    with pytest.raises(PresenterError) as ours_error:
        bill.present({**BILL, "lines": {"card": "x"}})
    with pytest.raises(PresenterError) as their_error:
        general.present({**BILL, "lines": {"card": "x"}})
    assert str(ours_error.value) == str(their_error.value)


def test_loose_embeds_present_as_lists_or_objects_are_validated_with_the_item_in_one_call():
    """Every loose (not trusted) embed present as a list or an object: the item and its embeds are one dict
    schema (`dictschema.combined`), with the general path's output; any other shape, a value the schema
    refuses, or a key the item declares itself takes the parts' own schemas, as before."""
    lines = Presenter("Line").schema({"sku": str, "card": str | None}).redact_pii(["card"]).rules(["Line rule."])
    owner = Presenter("Owner").schema({"name": str, "phone": str | None}).redact_pii(["phone"])
    bill = (Presenter("Bill").schema({"id": str, "email": str}).rules(["Bill rule."]).redact_pii(["email"])
            .embed("lines", lines).embed("owner", owner)).freeze()
    general = _general(bill)
    raw = {**BILL, "lines": [{"sku": "A", "card": "4111 1111", "x": 1}], "owner": {"name": "Ada", "phone": "+44 20"}}
    cases = [raw, {**raw, "lines": {"sku": "B", "card": None}}, {**raw, "owner": None}, {**raw, "lines": None},
             {**raw, "lines": ({"sku": "A", "card": None},)}, {**raw, "lines": [{"sku": "A", "card": 1}, {"sku": "B"}]}]
    expected = [general.present(case) for case in cases]

    def apart(*args: Any) -> Any:
        raise AssertionError("an embed was validated apart")

    for child in (lines, owner):
        object.__setattr__(child, "_dump_many", apart)
        object.__setattr__(child, "_dump_one", apart)
    for case, theirs in zip(cases[:2], expected, strict=False):
        ours = bill.present(case)
        assert ours.texts == theirs.texts and ours.view.data == theirs.view.data
        assert list(ours.view.data) == ["id", "email", "lines", "owner"]
    assert "4111 1111" not in bill.present(raw).text and "+44 20" not in bill.present(raw).text
    assert set(bill._cache.plan.codecs) == {1, 0}  # lines as a list, lines as an object
    for child in (lines, owner):
        object.__delattr__(child, "_dump_many")
        object.__delattr__(child, "_dump_one")
    for case, theirs in zip(cases, expected, strict=True):
        ours = bill.present(case)
        assert ours.texts == theirs.texts and ours.view.data == theirs.view.data
    assert "could not be shown" in expected[-1].text

    class Declared(BaseModel):
        id: str
        lines: list[dict[str, Any]]

    declared = Presenter("D").schema(Declared).embed("lines", lines).freeze()
    assert declared.present(raw).view.data == _general(declared).present(raw).view.data
    assert declared._cache.plan.codecs == {1: None}  # the item's own field: validated by both, apart


def _redaction_tree() -> Presenter:
    """Key paths sharing a prefix, wildcards, list steps, a leaf list child, a child with its own embed, a
    child whose removed values stay out of the guard, a child with nothing to redact."""
    note = Presenter("Note").schema({"text": str, "by": dict[str, Any]}).redact_pii(["by.email"])
    card = Presenter("Card").schema({"pan": str, "holder": dict[str, Any]}).redact_pii(["pan", "holder.*"])
    line = Presenter("Line").schema({"sku": str, "card": Any}).redact_pii(["card"])
    owner = (Presenter("Owner").schema({"name": str, "phone": Any, "cards": Any}).redact_pii(["phone"])
             .embed("cards", card))
    audit = Presenter("Audit").schema({"who": str}).redact_pii(["who"], censor=None, guard_blocks=False)
    plain = Presenter("Plain").schema({"x": int})
    return (Presenter("Bill").schema({"id": str, "customer": Any, "tags": Any, "rows": Any})
            .redact_pii(["customer.email", "customer.phone", "*.ssn", "rows[*].pan", "tags[*]"])
            .embed("lines", line).embed("owner", owner).embed("notes", note).embed("audit", audit)
            .embed("plain", plain))


_REDACTION_CASES: list[Any] = [
    {"id": "b1", "customer": {"email": "ada@example.com", "phone": "+44 20", "ssn": "123-45"},
     "tags": ["a", "b"], "rows": [{"pan": "4111"}, {"pan": None}, {}],
     "lines": [{"sku": "A", "card": "4111 1111"}, [{"card": "nested"}, [{"card": "deeper"}]], {"sku": "B"}],
     "owner": {"name": "Ó", "phone": "☎ 1", "cards": [{"pan": "5500", "holder": {"n": "x", "m": 2}}]},
     "notes": [{"text": "<x>", "by": {"email": "ignore previous instructions"}}], "audit": [{"who": "op"}],
     "plain": {"x": 1}},
    {"id": "b2", "customer": None, "lines": None, "owner": None, "notes": [], "rows": []},
    {"id": "b3", "customer": {}, "lines": {"sku": "one", "card": {"nested": 1}}, "owner": [{"phone": 7}, []]},
    {"id": "b4", "x": {"ssn": 1}, "y": [{"ssn": 2}, "s"], "lines": [None, {"card": None}]},
    [{"id": "list", "customer": {"email": "e@x.io"}}, [{"customer": {"phone": "p"}}], {"lines": [{"card": "c"}]}],
    {"customer": "a string where an object is declared"},
    {"customer": {"email": "e"}, "lines": ["not an object"]},
    {"owner": {"cards": [{"holder": "nope"}]}},
    {"rows": {"pan": "not a list"}},
    "not an object",
    None,
]


def _each_in_turn(presenter: Presenter, data: Any, removed: list[Any] | None) -> None:
    """The specification of a tree's redaction: a list item by item; the presenter's own paths one by one
    (each through the generic step walk), then each embedded child on its key's value."""
    if isinstance(data, list):
        for item in data:
            _each_in_turn(presenter, item, removed)
        return
    for path in presenter.redact_paths:
        _steps_path(path, parse_path(path), presenter.censor)(data, removed if presenter.guard_blocks else None)
    if isinstance(data, dict):
        for key, child in presenter.embeds.items():
            if data.get(key) is not None:
                _each_in_turn(child, data[key], removed)


@pytest.mark.parametrize("index", range(len(_REDACTION_CASES)))
def test_the_compiled_redaction_tree_redacts_as_each_presenter_in_turn(index):
    """A presenter redacts through one generated function (`redaction.compile_tree`): the same data, the same
    removed values in the same order, the same errors as each presenter's paths applied in turn."""
    import copy

    frozen, walked = _redaction_tree().freeze(), _redaction_tree()
    ours, theirs = copy.deepcopy(_REDACTION_CASES[index]), copy.deepcopy(_REDACTION_CASES[index])
    ours_removed: list[Any] = []
    theirs_removed: list[Any] = []
    try:
        _each_in_turn(walked, theirs, theirs_removed)
    except Exception as exc:  # noqa: BLE001 - the same exception, whatever it is
        with pytest.raises(type(exc), match=re.escape(str(exc))):
            frozen.redact(ours, ours_removed)
    else:
        frozen.redact(ours, ours_removed)
    assert ours == theirs and ours_removed == theirs_removed
    assert frozen._cache.redact not in (None, False)
    walked_none = copy.deepcopy(_REDACTION_CASES[index])
    if index < 5:
        frozen.redact(walked_none)  # no list to collect into: redacted all the same
        assert walked_none == theirs
        walked.redact(walked_none, [])  # unfrozen: compiled for the call, the same function
        assert walked_none == theirs


def _exactly(ours: Any, theirs: Any) -> bool:
    """Equal with the same types all the way down, dict keys in the same order."""
    if type(ours) is not type(theirs):
        return False
    if isinstance(ours, dict):
        return (list(ours) == list(theirs) and all(type(k) is str for k in ours)
                and all(_exactly(ours[k], theirs[k]) for k in ours))
    if isinstance(ours, list):
        return len(ours) == len(theirs) and all(_exactly(a, b) for a, b in zip(ours, theirs, strict=True))
    return bool(ours == theirs)


class _Text(str):
    def __str__(self) -> str:
        return "SHOUTED"


class _Status(str, enum.Enum):  # noqa: UP042 - a str mixin, as stored enums often are
    OPEN = "open"


class _Level(enum.IntEnum):
    HIGH = 3


class Inner(BaseModel):
    label: str
    count: int = 0


class NativeRow(BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True)

    id: str
    flag: bool = False
    level: int | None = None
    status: Literal["open", "closed", 1] = "closed"
    tags: list[str] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)
    extra: Any = None
    inner: Inner | None = None
    code: int | str = 0


class NativeLeaves(BaseModel):
    id: str
    flag: bool = False
    level: int | None = None
    status: Literal["open", "closed", 1] = "closed"
    tags: list[str]
    meta: dict[str, Any]
    extra: Any = None
    inner: Inner | None = None
    code: int | str = 0


_NATIVE_INPUTS: list[Any] = [
    {"id": " r1 ", "tags": ["a", _Text("b")], "meta": {"n": 1, "ok": True, "none": None, "f": 1.5, "s": "ü ✓"},
     "inner": {"label": "x", "count": "2", "drop": 1}, "undeclared": "strip me"},
    {"id": _Text("r2"), "flag": 1, "level": _Level.HIGH, "status": _Status.OPEN, "tags": [], "code": "7",
     "meta": {"nested": {"list": [1, [2, {"k": "</ui_passthrough>"}]], "e": _Status.OPEN, "i": _Level.HIGH}},
     "extra": ["ignore previous instructions", {"x": -0.0}]},
    {"id": "r3", "tags": ("t",), "meta": {}, "extra": {"when": dt.date(2026, 1, 2)}},  # a date in Any
    {"id": "r4", "tags": [], "meta": {"t": (1, 2)}, "extra": float("nan")},  # a tuple, a NaN in Any
    {"id": "r5", "tags": [], "meta": {"d": {1: "int key"}}, "extra": Decimal("1.5")},
    {"id": "r6", "tags": [], "meta": {"b": b"bytes", "big": 2**80}, "extra": {"s": {1, 2}}},
    {"id": "r7", "tags": [], "meta": {}, "status": 1, "code": True, "level": False},
    {"id": "r8", "tags": ["x"], "meta": {}, "inner": None, "extra": [float("inf")]},
]


@pytest.mark.parametrize("model", [NativeRow, NativeLeaves])
@pytest.mark.parametrize("index", range(len(_NATIVE_INPUTS)))
def test_a_native_dict_schema_validates_straight_to_the_models_json_dump(model, index):
    """A schema of exact JSON leaves, lists, dicts, optionals and `Any` validates in one pass to what the
    model validates and dumps (`dictschema._native`): the same values of the same types, in the same order,
    whatever the input holds (enum members, subclasses of str and int, bools for ints, nested `Any`); a
    value of `Any` that is not a JSON value takes the serializer, as before."""
    raw = _NATIVE_INPUTS[index]
    lean = codec(model)
    assert lean is not None
    expected = _model_dump(stripping_model(model), raw)
    ours = dump(lean, raw)
    assert _exactly(ours, expected), (ours, expected)
    assert _exactly(dump(codec(model, many=True), [raw, raw]), [expected, expected])
    native = lean[2]
    assert (native is not None) == (model is NativeLeaves)
    if native is not None and index in (0, 1, 6):
        assert _exactly(native.validate_python(raw), expected)  # taken in one pass
    if native is not None and index in (2, 3, 4, 5, 7):
        with pytest.raises(ValidationError):
            native.validate_python(raw)  # the serializer's business


class Dated(BaseModel):
    id: str
    on: dt.date
    due: dt.date
    until: dt.date | None = None
    either: dt.date | str = ""
    days: list[dt.date] | None = None


class _OwnDate(dt.date):
    def isoformat(self) -> str:
        return "not what the serializer writes"


_DATED_INPUTS: list[Any] = [
    {"id": "d1", "on": dt.date(2026, 1, 2), "due": "2026-02-03T10:11:12", "until": None},
    {"id": "d2", "on": "2026-01-02", "due": dt.datetime(2026, 2, 3, 4, 5), "until": dt.date(5, 6, 7),
     "either": "2026-03-04", "days": [dt.date(9999, 12, 31), "0001-01-01"]},
    {"id": "d3", "on": _OwnDate(2026, 1, 2), "due": dt.date(2026, 2, 3), "either": dt.date(2026, 3, 4),
     "until": dt.datetime(2026, 4, 5)},
]


@pytest.mark.parametrize("raw", _DATED_INPUTS)
def test_a_native_dict_schema_writes_dates_as_the_serializer_does(raw):
    """Dates (cast or not, optional, in a union or a list) validate in one pass to their ISO text, as the
    model's JSON dump writes them."""
    model = Model(Dated, casts={"due": "date"}).schema
    lean = codec(model)
    assert lean is not None and lean[2] is not None
    expected = _model_dump(model, raw)
    assert _exactly(lean[2].validate_python(raw), expected), (lean[2].validate_python(raw), expected)
    assert _exactly(dump(codec(model, many=True), [raw]), [expected])


@pytest.mark.parametrize("config", [{"ser_json_temporal": "seconds"}, {"ser_json_timedelta": "float"},
                                    {"ser_json_bytes": "base64"}])
def test_a_model_that_serializes_its_own_way_keeps_the_model(config):
    """A dict schema's serializer would not read the model's serialization settings: no dict schema."""
    class Configured(BaseModel):
        model_config = ConfigDict(**config)
        on: dt.date
        took: dt.timedelta
        blob: bytes

    assert codec(Configured) is None
    raw = {"on": dt.date(2026, 1, 2), "took": dt.timedelta(seconds=3), "blob": b"ab"}
    presented = Presenter("configured").schema(Configured).present(raw).view.data
    assert _exactly(presented, _model_dump(stripping_model(Configured), raw))


def test_a_native_dict_schema_refuses_what_the_model_refuses():
    lean = codec(NativeLeaves)
    assert lean is not None and lean[2] is not None
    for bad in [{"tags": [], "meta": {}}, {"id": 1, "tags": [], "meta": {}}, {"id": "x", "tags": [1], "meta": {}},
                {"id": "x", "tags": [], "meta": {}, "status": "other"}, {"id": "x", "tags": [], "meta": []}]:
        with pytest.raises(ValidationError):
            _model_dump(stripping_model(NativeLeaves), bad)
        with pytest.raises(ValidationError):
            dump(lean, bad)


def test_the_benchmark_invoice_takes_one_pass_and_its_output_is_the_models():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from mcpfusion_server import invoice_presenter
    from peers.invoice import PUBLIC, RAW

    response = invoice_presenter.present(RAW)
    assert response.view.data == PUBLIC and response.texts[0] == json.dumps(PUBLIC, separators=(",", ":"))
    assert all(c is not None and c[2] is not None for c in invoice_presenter._cache.plan.codecs.values())


class Tree(BaseModel):
    name: str
    kids: list["Tree"]
    meta: Any = None


def test_a_recursive_model_takes_one_pass_too():
    lean = codec(Tree)
    assert lean is not None and lean[2] is not None
    raw = {"name": "a", "kids": [{"name": "b", "kids": [], "meta": {"x": [1, None]}, "y": 1}], "z": 2}
    assert _exactly(dump(lean, raw), _model_dump(stripping_model(Tree), raw))
    dated = {"name": "a", "kids": [{"name": "b", "kids": [], "meta": dt.datetime(2026, 1, 2, 3, 4)}]}
    assert _exactly(dump(lean, dated), _model_dump(stripping_model(Tree), dated))


# -- the response's hot-path construction (ui.table's filled layout, a block's tag, assemble) ---------------


class _Shown:
    """A cell whose `str()`, `format()` and `repr()` all differ: the table writes `str()`."""

    def __str__(self) -> str:
        return "shown {x} %s"

    def __format__(self, spec: str) -> str:
        return "formatted"

    def __repr__(self) -> str:
        return "repr"


class _Color(enum.IntEnum):
    RED = 1


_CELLS = ["plain", "", "{x}", "{{", "}", "%s", "%%", "\\n", '"quoted"', "'", "é ☃ 😀", "a|b", "two\nlines",
          1299.0, 1e16, -0.0, 7, 2**70, True, None, _Shown(), _Color.RED, ("t", 1), b"bytes", dt.date(2026, 1, 2)]


def _general_table(headers: list[Any], rows: list[list[Any]]) -> str:
    return ui._table([ui.table_cell(ui._text(h)) for h in headers], [[ui.table_cell(ui._text(c)) for c in row] for row in rows])


@pytest.mark.parametrize("width", [1, 2, 3, 5])
def test_a_tables_filled_layout_writes_what_the_general_path_writes(width):
    for height in (0, 1, 2, 7, 64):
        cells = [_CELLS[(i * 7 + width) % len(_CELLS)] for i in range(width * (height + 1))]
        headers, rows = cells[:width], [cells[width * (r + 1):width * (r + 2)] for r in range(height)]
        block = ui.table(headers, rows)
        assert block == ui.UIBlock("markdown", _general_table(headers, rows))
        assert block.render() == ui.UIBlock("markdown", block.content, title=None).render()


def test_a_type_only_blocks_tag_is_the_cached_tags():
    class Kind(str):
        def __str__(self) -> str:
            return "other"

    for kind in ["markdown", "echarts", 'a"b&c<d', "é", Kind("markdown")]:
        block = ui.UIBlock(kind, "body")
        expected = f"{ui._opening.__wrapped__(kind, None, None, None)}\nbody\n</ui_passthrough>"
        assert block.render() == expected == block.render()
    assert ui.UIBlock(Kind("markdown"), "x").render().startswith('<ui_passthrough type="other">')
    titled = ui.UIBlock("markdown", "body", title="T", width="half", priority=2)
    assert titled.render() == f"{ui._opening('markdown', 'T', 'half', 2)}\nbody\n</ui_passthrough>"


def test_assemble_makes_the_view_and_response_their_constructors_make():
    from dataclasses import fields

    from mcpfusion.response import ResponseView, Suggestion, ToolResponse, assemble

    class Loud(Suggestion):
        def render(self) -> str:
            return "LOUD"

    one, two = suggest("a.b", "why <not>"), suggest("c.d", "because & so")
    for data, pretty, suggestions in [({"a": 1}, False, [one]), ({"a": 1}, True, [one, two]), ([1, 2], False, []),
                                      ("text", False, [Loud("x", "y")]), (None, False, [one])]:
        blocks, rules = [ui.summary("s")], ["r1"]
        response = assemble(data, pretty, blocks, ["<embed/>"], ["d1"], rules, suggestions)
        lines = [s.render() for s in suggestions]
        expected_texts = response.texts[:-1] + (["<action_suggestions>\n" + "\n".join(
            f"- {markup_attr(line)}" for line in lines) + "\n</action_suggestions>"] if lines else [response.texts[-1]])
        assert response.texts == expected_texts
        encoding = "text" if data is None or isinstance(data, str) else "pretty" if pretty else "json"
        view = ResponseView(data=data, system_rules=rules, ui_blocks=blocks, suggestions=suggestions,
                            encoding=encoding)
        assert all(getattr(response.view, f.name) == getattr(view, f.name) for f in fields(ResponseView))
        assert response.view == view and response.view.system_rules is rules
        reference = ToolResponse(response.texts, view=view)
        if encoding == "json":
            reference.written = (data, response.texts[0], response.texts[0].encode())  # its bytes kept
        for name in ToolResponse.__slots__:
            assert getattr(response, name) == getattr(reference, name), name
        assert response.written is None or response.written[1] is response.texts[0]


def markup_attr(text: str) -> str:
    from mcpfusion import markup

    return markup.attr(text)


def test_dates_are_written_the_same_however_often_they_recur():
    """The dict schema remembers dates' ISO text: the same date as another object, a datetime equal in its
    day, a subclass and more dates than the memo holds are each written as the model writes them."""
    model = Model(Dated, casts={"due": "date"}).schema
    lean = codec(model, many=True)
    assert lean is not None
    start = dt.date(2000, 1, 1)
    rows = [{"id": str(n), "on": start + dt.timedelta(days=n % 5000), "due": dt.datetime(2026, 2, 3, n % 24),
             "until": _OwnDate(1999, 12, 31) if n % 2 else dt.date(1999, 12, 31)} for n in range(10_000)]
    out = dump(lean, rows)
    assert out == [_model_dump(model, raw) for raw in rows]
    assert out[4999]["on"] == "2013-09-08" and out[5000]["on"] == "2000-01-01" and out[1]["due"] == "2026-02-03"
