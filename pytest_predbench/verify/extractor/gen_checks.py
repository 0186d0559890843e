#!/usr/bin/env python3
"""Generate versions/V/checks_table.rs: the per-type constructor table of `pred-extract validate`.

For every concrete problem variant declared with `declare_variants!` in the
problemreductions V source (cargo's registry copy), pick the public constructor (`try_new`, `new`,
`with_*`) whose parameter names are all serde fields of the struct, covering the
most fields (a `try_new` returning `Result<Self, String>` wins ties).  The Rust side
deserializes each argument from the problem's JSON by field name; the argument types
are inferred from the constructor signature, so no types are written here. The `Decision<P>`
variants are listed too (`decisions!`): each is checked by P's own entry on its `inner` field.

Run: python3 gen_checks.py --version 0.6.0   (staged as src/checks_table.rs for that version)
"""

import argparse
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# Hand-reviewed exclusions: constructors whose argument types cannot be inferred
# (function-level generics like `A: ToBigUint`), listed with the reason.
SKIP_GENERIC_FN = True


def block_end(s, i):
    """Index just past the brace block opening at or after i."""
    i = s.index("{", i)
    depth = 0
    for j in range(i, len(s)):
        if s[j] == "{":
            depth += 1
        elif s[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(s)


def struct_fields(s, name):
    m = re.search(r"pub struct " + name + r"\b[^{;(]*\{", s)
    if not m:
        return None
    body = s[m.end() : block_end(s, m.end() - 1) - 1]
    fields, skip = [], False
    for line in body.split("\n"):
        t = line.strip()
        if t.startswith("#[serde(skip"):
            skip = True
            continue
        fm = re.match(r"(?:pub(?:\([a-z]+\))?\s+)?([a-z_][a-z0-9_]*)\s*:", t)
        if fm and not t.startswith("//"):
            if not skip:
                fields.append(fm.group(1))
            skip = False
    return fields


def split_args(g):
    """'<KN, G>' -> ['KN', 'G'] (top-level commas only)."""
    if not g:
        return []
    g, out, depth, cur = g.strip()[1:-1], [], 0, ""
    for ch in g:
        depth += ch in "<(["
        depth -= ch in ">)]"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + [cur.strip()] if cur.strip() else out


def constructors(s, name):
    out = []
    for m in re.finditer(r"\nimpl(<[^{]*?>)?\s+" + name + r"\b(<[^{]*?>)?\s*(?:where[^{]*)?\{", s):
        body = s[m.end() - 1 : block_end(s, m.end() - 1)]
        # `impl<G> KColoring<KN, G>`: constructors only exist for instantiations whose
        # concrete positions match (generic positions match anything).
        impl_generics = [g.split(":")[0].strip() for g in split_args(m.group(1))]
        impl_args = split_args(m.group(2))
        spec = [None if a in impl_generics else a for a in impl_args]
        for f in re.finditer(r"\n    pub fn ([a-z_0-9]+)\s*(<[^(]*>)?\s*\(", body):
            fname, gen = f.groups()
            depth, j = 1, f.end()
            while depth:
                depth += {"(": 1, ")": -1}.get(body[j], 0)
                j += 1
            params = body[f.end() : j - 1]
            rm = re.match(r"\s*->\s*([^{\n]+?)\s*(?:where|\{)", body[j:])
            if not rm:
                continue
            ret = rm.group(1).strip()
            if ret == "Self" or ret == name or ret.startswith(name + "<"):
                kind = "new"
            elif re.fullmatch(r"Result<(Self|" + name + r"[^,]*), String>", ret):
                kind = "try"
            else:
                continue
            pnames = re.findall(r"(?:^|,)\s*(?:mut\s+)?([a-z_][a-z0-9_]*)\s*:(?!:)", params)
            if "&" in params or "self" in params:
                continue
            out.append((fname, kind, pnames, gen, spec))
    return out


def decision_variants(s):
    """The inner types P of the `Decision<P>` variants a model file registers."""
    found = re.findall(r"register_decision_variant!\(\s*([A-Za-z0-9_]+<[^>]*>|[A-Za-z0-9_]+)\s*,", s)
    found += re.findall(r"impl crate::traits::DeclaredVariant for Decision<(.+?)> \{\}", s)
    return [x.replace("crate::types::", "") for x in found]


def models_dir(version):
    found = glob.glob(os.path.expanduser(f"~/.cargo/registry/src/*/problemreductions-{version}/src/models"))
    if not found:
        sys.exit(f"gen_checks: no problemreductions-{version} source in cargo's registry (cargo fetch it first)")
    return found[0]


def table(version):
    """The generated table's text, and how many variants have / lack a field-named constructor."""
    entries, unchecked, decisions = [], [], []
    for f in sorted(glob.glob(models_dir(version) + "/*/*.rs")):
        s = open(f).read()
        decisions += decision_variants(s)
        m = re.search(r"declare_variants!\s*\{(.*?)\n\}", s, re.S)
        if not m:
            continue
        insts = re.findall(r"(?:default\s+)?([A-Za-z0-9_]+)(<[^=]*?>)?\s*=>", m.group(1))
        for struct in sorted({i[0] for i in insts}):
            fields = struct_fields(s, struct) or []
            for sname, params in insts:
                if sname != struct:
                    continue
                args = [a.replace("crate::types::", "") for a in split_args(params)]
                best = None
                for fname, kind, pnames, gen, spec in constructors(s, struct):
                    if not pnames or not set(pnames) <= set(fields):
                        continue
                    if gen and SKIP_GENERIC_FN:
                        continue
                    if spec and any(x is not None and x != a for x, a in zip(spec, args, strict=False)):
                        continue
                    score = (len(pnames), kind == "try", fname == "new")
                    if best is None or score > best[0]:
                        best = (score, fname, kind, pnames)
                ty = sname + ("<" + ", ".join(args) + ">" if args else "")
                if best:
                    _, fname, kind, pnames = best
                    entries.append(
                        f"    {'result' if kind == 'try' else 'assert'} {ty} => {fname}({', '.join(pnames)});"
                    )
                else:
                    unchecked.append(ty)
    lines = [
        f"// @generated by gen_checks.py from problemreductions {version} -- do not edit by hand.",
        "// No field-named constructor (see hand_written() in checks.rs): " + ", ".join(unchecked),
        "checks! {",
        *entries,
        "}",
        "// Decision<P> variants (register_decision_variant!, or registered by hand): P's own check on `inner`.",
        "decisions! {",
        *(f"    {inner};" for inner in decisions),
        "}",
    ]
    return "\n".join(lines) + "\n", len(entries) + len(decisions), len(unchecked)


def main():
    parser = argparse.ArgumentParser(description="generate versions/V/checks_table.rs")
    parser.add_argument("--version", required=True, help="library version, a directory under versions/")
    version = parser.parse_args().version
    out = os.path.join(HERE, "..", "versions", version, "checks_table.rs")
    text, checked, unchecked = table(version)
    os.makedirs(os.path.dirname(out), exist_ok=True)  # a new version's directory
    with open(out, "w") as handle:
        handle.write(text)
    print(f"wrote {os.path.normpath(out)}: {checked} checked, {unchecked} unchecked")


if __name__ == "__main__":
    main()
