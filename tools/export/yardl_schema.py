#!/usr/bin/env python3
"""The protocol schema JSON that yardl embeds in its binary files, computed from a yardl
package directory (model/*.yml) by yardl's rules: types resolved (built-in aliases to their
primitive, others to Namespace.Name), comments and computed fields left out, the transitive
closure of named types sorted by qualified name, compact JSON in the field order of yardl's
definitions. Usage: yardl_schema.py MODEL_DIR [PROTOCOL]

One namespace, no imports (PETSIRD's case). tests/export/data/README.md says what it was
checked against and what it produced.
"""
import json
import os
import re
import sys

import yaml

BUILTIN = {"int": "int32", "uint": "uint32", "float": "float32", "double": "float64",
           "bool": "bool", "string": "string", "datetime": "datetime", "date": "date",
           "time": "time", "size": "size", "complexfloat": "complexfloat32",
           "complexdouble": "complexfloat64"}
PRIMITIVES = {"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "size",
              "float32", "float64", "complexfloat32", "complexfloat64", "bool", "string",
              "date", "time", "datetime"}


class Tagged:
    def __init__(self, tag, value):
        self.tag, self.value = tag, value


class Loader(yaml.SafeLoader):
    pass


def _tagged(loader, suffix, node):
    if isinstance(node, yaml.MappingNode):
        v = loader.construct_mapping(node, deep=True)
    elif isinstance(node, yaml.SequenceNode):
        v = loader.construct_sequence(node, deep=True)
    else:
        v = loader.construct_scalar(node)
    return Tagged("!" + suffix, v)


Loader.add_multi_constructor("!", _tagged)


# ---- type syntax: Name(<args>)? then tails ? * *N [dims] ----
TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)|(\d+)|(.))")


def tokenize(s):
    out, pos = [], 0
    s = s.strip()
    while pos < len(s):
        m = TOKEN.match(s, pos)
        if m.group(1):
            out.append(("id", m.group(1)))
        elif m.group(2):
            out.append(("int", int(m.group(2))))
        else:
            out.append(("p", m.group(3)))
        pos = m.end()
        while pos < len(s) and s[pos] == " ":
            pos += 1
    return out


def parse_type(s):
    toks = tokenize(s)
    t, i = _parse(toks, 0)
    assert i == len(toks), (s, toks[i:])
    return t


def _parse(toks, i):
    if toks[i] == ("p", "("):
        t, i = _parse(toks, i + 1)
        assert toks[i] == ("p", ")")
        i += 1
    else:
        kind, name = toks[i]
        assert kind == "id", toks[i]
        i += 1
        args = []
        if i < len(toks) and toks[i] == ("p", "<"):
            i += 1
            while True:
                a, i = _parse(toks, i)
                args.append(a)
                if toks[i] == ("p", ","):
                    i += 1
                    continue
                assert toks[i] == ("p", ">")
                i += 1
                break
        t = {"simple": name, "args": args}
    while i < len(toks):
        tok = toks[i]
        if tok == ("p", "?"):
            t = {"cases": [None, t]}
            i += 1
        elif tok == ("p", "*"):
            i += 1
            length = None
            if i < len(toks) and toks[i][0] == "int":
                length = toks[i][1]
                i += 1
            t = {"cases": [t], "vector": length}
        elif tok == ("p", "["):
            i += 1
            dims = []
            if toks[i] != ("p", "]"):
                while True:
                    d = {}
                    if toks[i][0] == "id":
                        d["name"] = toks[i][1]
                        i += 1
                        if toks[i] == ("p", ":"):
                            d["length"] = toks[i + 1][1]
                            i += 2
                    elif toks[i][0] == "int":
                        d["length"] = toks[i][1]
                        i += 1
                    dims.append(d)
                    if toks[i] == ("p", ","):
                        i += 1
                        continue
                    break
            assert toks[i] == ("p", "]")
            i += 1
            t = {"cases": [t], "array": dims if dims else None}
        else:
            break
    return t, i


def parse_yaml_type(v):
    if v is None:
        return None
    if isinstance(v, str):
        return parse_type(v)
    if isinstance(v, list):
        return {"cases": [parse_yaml_type(c) for c in v], "union": True}
    assert isinstance(v, Tagged), v
    if v.tag == "!vector":
        return {"cases": cases_of(v.value["items"]), "vector": v.value.get("length")}
    if v.tag == "!array":
        dims = v.value.get("dimensions")
        if isinstance(dims, int):
            dims = [{} for _ in range(dims)]
        elif isinstance(dims, list):
            dims = [{} if d is None else ({"name": d} if isinstance(d, str) else d) for d in dims]
        elif isinstance(dims, dict):
            dims = [dict({"name": k}, **({"length": l} if l is not None else {})) for k, l in dims.items()]
        return {"cases": cases_of(v.value["items"]), "array": dims}
    if v.tag == "!stream":
        return {"cases": cases_of(v.value["items"]), "stream": True}
    if v.tag == "!union":
        return {"cases": [dict(parse_yaml_type(t), tag=k) if t is not None else None
                          for k, t in v.value.items()], "union": True}
    raise ValueError(v.tag)


def cases_of(v):
    if isinstance(v, list):
        return [parse_yaml_type(c) for c in v]
    return [parse_yaml_type(v)]


class Model:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "_package.yml")) as f:
            self.ns = yaml.safe_load(f)["namespace"]
        self.defs = {}
        for name in sorted(os.listdir(model_dir)):
            if not name.endswith(".yml") or name.startswith("_"):
                continue
            with open(os.path.join(model_dir, name)) as f:
                doc = yaml.load(f, Loader=Loader) or {}
            for key, value in doc.items():
                m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:<(.*)>)?\s*", key)
                params = [p.strip() for p in m.group(2).split(",")] if m.group(2) else []
                self.defs[m.group(1)] = (params, value)

    def qualified(self, name, params):
        if name in params:
            return name
        if name in BUILTIN:
            return BUILTIN[name]
        if name in PRIMITIVES:
            return name
        if name in self.defs:
            return self.ns + "." + name
        if name.startswith(self.ns + ".") and name[len(self.ns) + 1:] in self.defs:
            return name
        raise KeyError(name)

    # The JSON value of a type, and the definitions it refers to (added to `refs`).
    def type_json(self, t, params, refs):
        if t is None:
            return None
        if "simple" in t:
            name = self.qualified(t["simple"], params)
            if name.startswith(self.ns + "."):
                refs.add(name[len(self.ns) + 1:])
            if not t["args"]:
                return name
            return {"name": name, "typeArguments": [self.type_json(a, params, refs) for a in t["args"]]}
        cases = t["cases"]
        is_union = len(cases) > 2 or (len(cases) == 2 and cases[0] is not None)
        tagged = is_union or (cases and cases[0] is not None and "tag" in cases[0])
        out_cases = []
        for c in cases:
            if c is None:
                out_cases.append(None)
                continue
            body = self.type_json({k: v for k, v in c.items() if k != "tag"}, params, refs)
            if tagged:
                tag = c.get("tag") or short_syntax(c)
                out_cases.append({"tag": tag, "type": body})
            else:
                out_cases.append(body)
        items = out_cases[0] if len(out_cases) == 1 else out_cases
        if "vector" in t:
            v = {"items": items}
            if t["vector"] is not None:
                v["length"] = t["vector"]
            return {"vector": v}
        if "array" in t:
            a = {"items": items}
            dims = t["array"]
            if dims is not None:
                if any(d for d in dims):
                    a["dimensions"] = [{k: d[k] for k in ("name", "length") if k in d} for d in dims]
                else:
                    a["dimensions"] = len(dims)
            return {"array": a}
        if "stream" in t:
            return {"stream": {"items": items}}
        return items

    def definition_json(self, name, refs):
        params, value = self.defs[name]
        head = {"name": name}
        if params:
            head["typeParameters"] = params
        if isinstance(value, Tagged) and value.tag == "!record":
            fields = [{"name": k, "type": self.type_json(parse_yaml_type(v), params, refs)}
                      for k, v in (value.value.get("fields") or {}).items()]
            return dict(head, fields=fields)
        if isinstance(value, Tagged) and value.tag in ("!enum", "!flags"):
            spec = value.value
            out = dict(head)
            if spec.get("base") is not None:
                out["base"] = self.type_json(parse_type(spec["base"]), params, refs)
            vals = spec["values"]
            if isinstance(vals, list):
                if value.tag == "!enum":
                    vals = {s: i for i, s in enumerate(vals)}
                else:
                    vals = {s: (1 << (i - 1) if i else 0) for i, s in enumerate(vals)}
            out["values"] = [{"symbol": s, "value": v} for s, v in vals.items()]
            return out
        return dict(head, type=self.type_json(parse_yaml_type(value), params, refs))

    def schema(self, protocol=None):
        if protocol is None:
            protocol = next(k for k, (_, v) in self.defs.items()
                            if isinstance(v, Tagged) and v.tag == "!protocol")
        refs = set()
        seq = [{"name": k, "type": self.type_json(parse_yaml_type(v), [], refs)}
               for k, v in self.defs[protocol][1].value["sequence"].items()]
        done, types = set(), {}
        while refs - done:
            name = sorted(refs - done)[0]
            done.add(name)
            new = set()
            types[name] = self.definition_json(name, new)
            refs |= new
        ordered = [types[n] for n in sorted(types, key=lambda n: self.ns + "." + n)]
        # Go marshals the empty list of types as null.
        doc = {"protocol": {"name": protocol, "sequence": seq}, "types": ordered or None}
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def short_syntax(t):
    if "simple" in t and not t["args"]:
        return BUILTIN.get(t["simple"], t["simple"])
    raise NotImplementedError(t)


if __name__ == "__main__":
    sys.stdout.write(Model(sys.argv[1]).schema(sys.argv[2] if len(sys.argv) > 2 else None))
