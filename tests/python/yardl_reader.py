"""A reader of yardl's compact binary encoding driven by the schema the file embeds.

Written for the PETSIRD export's tests from yardl's reference documentation (binary encoding
and protocol schema JSON) and its C++ runtime's corner cases, independently of petdaq's
writer: it knows no PETSIRD field, it decodes whatever the embedded schema says, so a byte
the writer put in the wrong place makes the decoding fail or the values differ.

read(path) -> (schema_text, {step name: value}); a stream step is a list of its items.
Records are dicts, unions are (tag, value) pairs, optionals are None or the value,
vectors and arrays are lists (arrays nested row-major), enums are their integer value.
"""

import json
import struct

MAGIC = b"yardl"
VERSION = 1


class YardlError(Exception):
    pass


class _Stream:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise YardlError(f"unexpected end of data at byte {self.pos} (wanted {n})")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def byte(self):
        return self.take(1)[0]

    def varuint(self):
        shift, value = 0, 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise YardlError(f"varint too long at byte {self.pos}")

    def varint(self):
        u = self.varuint()
        return (u >> 1) ^ -(u & 1)


# Primitive decoders. 8-bit integers are raw bytes (yardl's runtime), not varints.
_PRIMITIVES = {
    "bool": lambda s: _bool(s.byte(), s),
    "int8": lambda s: struct.unpack("<b", s.take(1))[0],
    "uint8": lambda s: s.byte(),
    "int16": _Stream.varint, "int32": _Stream.varint, "int64": _Stream.varint,
    "uint16": _Stream.varuint, "uint32": _Stream.varuint, "uint64": _Stream.varuint,
    "size": _Stream.varuint,
    "float32": lambda s: struct.unpack("<f", s.take(4))[0],
    "float64": lambda s: struct.unpack("<d", s.take(8))[0],
    "complexfloat32": lambda s: complex(*struct.unpack("<ff", s.take(8))),
    "complexfloat64": lambda s: complex(*struct.unpack("<dd", s.take(16))),
    "string": lambda s: s.take(s.varuint()).decode("utf-8"),
    "date": _Stream.varint, "time": _Stream.varint, "datetime": _Stream.varint,
}

_RANGES = {"uint16": 1 << 16, "uint32": 1 << 32, "int16": 1 << 15, "int32": 1 << 31}


def _bool(b, s):
    if b not in (0, 1):
        raise YardlError(f"bool byte {b} at byte {s.pos - 1}")
    return bool(b)


class Decoder:
    def __init__(self, schema):
        self.schema = schema
        self.types = {}
        namespace = None
        for step in schema["protocol"]["sequence"]:
            namespace = namespace or _namespace_of(step["type"])
        for t in schema["types"] or []:
            self.types[f"{namespace}.{t['name']}"] = t

    def value(self, s, t, env=None):
        env = env or {}
        if isinstance(t, str):
            if t in env:
                return self.value(s, env[t][0], env[t][1])
            if t in _PRIMITIVES:
                v = _PRIMITIVES[t](s)
                low = -_RANGES[t] if t.startswith("int") else 0
                if t in _RANGES and not low <= v < _RANGES[t]:
                    raise YardlError(f"{t} value {v} out of range at byte {s.pos}")
                return v
            return self.named(s, t, [], env)
        if isinstance(t, list):
            return self.union(s, t, env)
        if "name" in t:  # a generic type with its arguments
            return self.named(s, t["name"], t.get("typeArguments", []), env)
        if "vector" in t:
            v = t["vector"]
            n = v["length"] if "length" in v else s.varuint()
            return [self.value(s, v["items"], env) for _ in range(n)]
        if "array" in t:
            a = t["array"]
            dims = a.get("dimensions")
            if dims is None:
                shape = [s.varuint() for _ in range(s.varuint())]
            elif isinstance(dims, int):
                shape = [s.varuint() for _ in range(dims)]
            elif all("length" in d for d in dims):
                shape = [d["length"] for d in dims]
            else:
                shape = [s.varuint() for _ in dims]
            return self._nested(s, a["items"], env, shape)
        if "stream" in t:
            items = []
            while True:
                n = s.varuint()
                if n == 0:
                    return items
                items.extend(self.value(s, t["stream"]["items"], env) for _ in range(n))
        if "map" in t:
            m = t["map"]
            return {self.value(s, m["keys"], env): self.value(s, m["values"], env)
                    for _ in range(s.varuint())}
        raise YardlError(f"unknown type {t}")

    def _nested(self, s, items, env, shape):
        if not shape:
            return self.value(s, items, env)
        return [self._nested(s, items, env, shape[1:]) for _ in range(shape[0])]

    def union(self, s, cases, env):
        # An optional ([null, T]) is a presence byte; a union its case index as a varint
        # (the same byte for indices below 128).
        optional = (len(cases) == 2 and cases[0] is None
                    and not (isinstance(cases[1], dict) and "tag" in cases[1]))
        index = s.varuint()
        if index >= len(cases):
            raise YardlError(f"union index {index} of {len(cases)} cases at byte {s.pos}")
        case = cases[index]
        if case is None:
            return None
        if optional:
            return self.value(s, case, env)
        return (case["tag"], self.value(s, case["type"], env))

    def named(self, s, name, args, env):
        d = self.types.get(name)
        if d is None:
            raise YardlError(f"type {name} is not in the schema")
        params = d.get("typeParameters", [])
        if len(params) != len(args):
            raise YardlError(f"{name} takes {len(params)} type arguments, got {len(args)}")
        inner = {p: (a, env) for p, a in zip(params, args)}
        if "fields" in d:
            return {f["name"]: self.value(s, f["type"], inner) for f in d["fields"]}
        if "values" in d:
            v = self.value(s, d.get("base", "int32"), inner)
            if v not in {x["value"] for x in d["values"]}:
                raise YardlError(f"{name}: value {v} is none of its symbols")
            return v
        return self.value(s, d["type"], inner)


def _namespace_of(t):
    if isinstance(t, str) and "." in t:
        return t.split(".")[0]
    if isinstance(t, dict):
        for v in t.values():
            ns = _namespace_of(v if not isinstance(v, dict) else v.get("items", v))
            if ns:
                return ns
    return None


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    s = _Stream(data)
    if s.take(5) != MAGIC:
        raise YardlError("not a yardl binary file")
    version = struct.unpack("<I", s.take(4))[0]
    if version != VERSION:
        raise YardlError(f"yardl binary version {version}")
    schema_text = s.take(s.varuint()).decode("utf-8")
    d = Decoder(json.loads(schema_text))
    steps = {}
    for step in d.schema["protocol"]["sequence"]:
        steps[step["name"]] = d.value(s, step["type"])
    if s.pos != len(data):
        raise YardlError(f"{len(data) - s.pos} bytes after the protocol's last step")
    return schema_text, steps
