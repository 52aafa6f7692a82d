"""The text form of an op pipeline, as the CLI takes it, parsed into gpupipe.v1.Op messages:

    affine(alpha=2, beta=1) | relu | softmax | convolve(taps=[0.25, 0.5, 0.25], mode=same)

Driven by the proto's reflection like the C++ grammar (client/ops_grammar.h): an op's name is
a field of Op's `kind` oneof, its params the fields of that field's message; numbers, lists of
numbers, true/false, and enum values by their short name (`mode=same` for MODE_SAME).
"""
import math
import re

from google.protobuf import descriptor as _descriptor

_TOKEN = re.compile(r"\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
                    r"|(?P<num>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf))"
                    r"|(?P<punct>[|(),=\[\]]))")


class OpsError(ValueError):
    """A pipeline that does not parse; the message names the cause and the column."""


def _tokens(text):
    pos = 0
    out = []
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return out
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise OpsError(f"unexpected character {text[pos]!r} at column {pos + 1}")
        kind = m.lastgroup
        out.append((kind, m.group(kind), pos + 1))
        pos = m.end()


def _repeated(field):
    # protobuf 7 dropped FieldDescriptor.label for is_repeated, which older runtimes lack.
    if hasattr(field, "is_repeated"):
        return field.is_repeated
    return field.label == _descriptor.FieldDescriptor.LABEL_REPEATED


def _scalar(field, tok):
    kind, value, col = tok
    if field.type == _descriptor.FieldDescriptor.TYPE_ENUM:
        if kind != "name":
            raise OpsError(f"{field.name}: expected a name at column {col}")
        enum = field.enum_type
        prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", enum.name).upper() + "_"
        for v in enum.values:
            if v.name in (value, value.upper(), prefix + value.upper()):
                return v.number
        names = ", ".join(v.name[len(prefix):].lower() if v.name.startswith(prefix) else v.name
                          for v in enum.values if v.number != 0)
        raise OpsError(f"{field.name}: unknown value {value!r} at column {col} (known: {names})")
    if field.type == _descriptor.FieldDescriptor.TYPE_BOOL:
        if value not in ("true", "false"):
            raise OpsError(f"{field.name}: expected true or false at column {col}")
        return value == "true"
    if kind == "name" and value in ("nan", "inf"):
        value = "nan" if value == "nan" else "inf"
    elif kind != "num":
        raise OpsError(f"{field.name}: expected a number at column {col}")
    number = float(value)
    if field.type in (_descriptor.FieldDescriptor.TYPE_DOUBLE, _descriptor.FieldDescriptor.TYPE_FLOAT):
        return number
    if not math.isfinite(number) or number != int(number):
        raise OpsError(f"{field.name}: expected an integer at column {col}")
    return int(number)


def parse_ops(text, op_type):
    """The Op messages of `text` (op_type: the generated gpupipe.v1.Op class)."""
    toks = _tokens(text)
    kind = op_type.DESCRIPTOR.oneofs_by_name["kind"]
    known = {f.name: f for f in kind.fields}
    ops = []
    i = 0

    def expect(value):
        nonlocal i
        if i >= len(toks) or toks[i][1] != value:
            where = f"column {toks[i][2]}" if i < len(toks) else "the end"
            raise OpsError(f"expected {value!r} at {where}")
        i += 1

    while True:
        if i >= len(toks) or toks[i][0] != "name":
            where = f"column {toks[i][2]}" if i < len(toks) else "the end"
            raise OpsError(f"expected an op name at {where}")
        name, col = toks[i][1], toks[i][2]
        i += 1
        if name not in known:
            raise OpsError(f"unknown op {name!r} at column {col} (known: {', '.join(known)})")
        op = op_type()
        msg = getattr(op, name)
        msg.SetInParent()
        if i < len(toks) and toks[i][1] == "(":
            i += 1
            while i < len(toks) and toks[i][1] != ")":
                if toks[i][0] != "name":
                    raise OpsError(f"{name}: expected a parameter name at column {toks[i][2]}")
                pname, pcol = toks[i][1], toks[i][2]
                i += 1
                field = msg.DESCRIPTOR.fields_by_name.get(pname)
                if field is None:
                    params = ", ".join(f.name for f in msg.DESCRIPTOR.fields) or "none"
                    raise OpsError(f"{name}: unknown parameter {pname!r} at column {pcol} "
                                   f"(known: {params})")
                expect("=")
                if _repeated(field):
                    expect("[")
                    values = []
                    while i < len(toks) and toks[i][1] != "]":
                        values.append(_scalar(field, toks[i]))
                        i += 1
                        if i < len(toks) and toks[i][1] == ",":
                            i += 1
                    expect("]")
                    getattr(msg, pname).extend(values)
                else:
                    if i >= len(toks):
                        raise OpsError(f"{name}: {pname} has no value")
                    setattr(msg, pname, _scalar(field, toks[i]))
                    i += 1
                if i < len(toks) and toks[i][1] == ",":
                    i += 1
            expect(")")
        ops.append(op)
        if i >= len(toks):
            return ops
        expect("|")
