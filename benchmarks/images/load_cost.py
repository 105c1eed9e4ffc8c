"""What loading a development's files costs, phrase by phrase, in the real
toplevels: the figures of runner/provers/hol_light/costs/context_costs.py's
LoadModel, fitted here.

Bytecode. One HOL Light toplevel boots (the checkout's ``hol.sh``, as a
sweep's bytecode session starts it, cwd the context root) and forks two
children (Unix.fork, as sessions fork images). Each runs ``FILE`` (default
s2n-bignum's arm/proofs/base.ml) as the toplevel would: every file it loads
inlined in load order, each ``needs``'d file once, ``loads
"update_database.ml"`` dropped (file_loads.FileLoads.order), with a
marker phrase after every phrase that appends ``Sys.time ()`` (CPU seconds)
to a file, so each phrase gets its own CPU time (the markers' own cost,
measured by a run of markers alone first, is subtracted). One child replays
the proofs as written, the other runs under ``let prove (tm, (_ : tactic)) =
mk_thm ([], tm)``, as ``--context-proofs trust`` does. Each child stops at
``--budget`` CPU seconds, so on a busy host only a prefix is measured; the
files it reached are fitted and reported.

Fit: under trust every phrase (proofs as definitions) costs ``a + b * KB``
(least squares over phrases, so the fit's total over them is exact);
under replay a proof phrase costs ``c + d * KB`` more. Printed: the fit, and
per file the measured and fitted totals and their error.

Native. Compiles the same file's libraries with the native build
(runner/provers/hol_light/native/native_compile.py, into a temporary library
folder, not the cache), timing every compiled module (camlp5 + ocamlopt,
CPU of the children), up to ``--compile-budget`` seconds of wall time; fits
``chunk + per KB``. Then starts the native server with the compiled modules
preloaded, with and without ``--trust``, and times it to READY against the
server with nothing preloaded: the native load of the same phrases, set
against the bytecode figures of those phrases for the mode's ratio.

    nice .venv/bin/python benchmarks/images/load_cost.py [--root /work/bench/s2n-bignum]
        [--hol-light /work/bench/hol-light] [--file arm/proofs/base.ml] [--budget 150]
        [--compile-budget 300] [--native-choice replay|trust] [--skip-bytecode] [--skip-native]
        [--json]
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import common  # first: it puts the project root on sys.path
from runner.provers.hol_light.costs.file_loads import FileLoads  # noqa: E402
from runner.provers.hol_light.install import find_hol_light  # noqa: E402


def load_avg() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a + b x."""
    n = len(xs)
    if n < 2:
        return (ys[0] if ys else 0.0), 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    return my - b * mx, b


# The markers timed alone first, to know one marker's own CPU cost.
MARKS = 1000


def write_driver(args, order, tmp: Path) -> Path:
    """The toplevel's script, driver.ml, beside the files its children load
    (markers alone, the phrases as written, the phrases under trust); its path."""
    (tmp / "marks.ml").write_text("".join(f"pb_mark {i};;\n" for i in range(MARKS)))
    body = "".join(f"{ph.text.rstrip()}\npb_mark {i};;\n" for i, (_, ph) in enumerate(order))
    (tmp / "replay.ml").write_text(body)
    (tmp / "trust.ml").write_text("let prove (tm, (_ : tactic)) = mk_thm ([], tm);;\npb_mark (-1);;\n"
                                  + body)
    script = ['#load "unix.cma";;',
              "let pb_oc = ref stdout;;",
              "let pb_stop = ref infinity;;",
              ("let pb_mark i = let t = Sys.time () in Printf.fprintf !pb_oc \"%d %.6f\\n%!\" i t; "
               "if t > !pb_stop then exit 0;;"),
              "let pb_null = Format.make_formatter (fun _ _ _ -> ()) (fun () -> ());;",
              ("let pb_fork file out budget = match Unix.fork () with "
               "0 -> pb_oc := open_out out; let t0 = Sys.time () in "
               "Printf.fprintf !pb_oc \"start %.6f\\n%!\" t0; pb_stop := t0 +. budget; "
               "let ok = Toploop.use_file pb_null file in "
               "Printf.fprintf !pb_oc \"end %b\\n%!\" ok; exit 0 | pid -> pid;;"),
              'Printf.printf "PB_BOOT %.3f\\n%!" (Sys.time ());;',
              f'ignore (Unix.waitpid [] (pb_fork "{tmp}/marks.ml" "{tmp}/marks.out" 60.0));;',
              f'let pb_a = pb_fork "{tmp}/trust.ml" "{tmp}/trust.out" {args.budget};;',
              f'let pb_b = pb_fork "{tmp}/replay.ml" "{tmp}/replay.out" {args.budget};;',
              "ignore (Unix.waitpid [] pb_a);; ignore (Unix.waitpid [] pb_b);;",
              'print_endline "PB_DONE";;']
    (tmp / "driver.ml").write_text("\n".join(script) + "\n")
    return tmp / "driver.ml"


def run_toplevel(args, install, driver: Path) -> float | None:
    """Boot the toplevel on the driver and wait for its children; the boot's
    CPU seconds (None if it never got that far)."""
    print(f"bytecode: booting {install.build} ({' '.join(install.argv)}), load {load_avg()}", flush=True)
    start = time.monotonic()
    with open(driver) as stdin:
        proc = subprocess.run(list(install.argv), stdin=stdin, capture_output=True, text=True,
                              cwd=args.root, check=False)
    boot = next((float(l.split()[1]) for l in proc.stdout.splitlines() if l.startswith("PB_BOOT")), None)
    print(f"bytecode: toplevel ran in {time.monotonic() - start:.0f} s wall, boot {boot} s CPU, "
          f"load {load_avg()}", flush=True)
    return boot


def read_marks(tmp: Path, name: str) -> tuple[dict[int, float], float, bool | None]:
    """A child's marks: {marker: CPU s at it}, its start's CPU s, and whether
    its file loaded to the end (None if it stopped at the budget)."""
    marks_at, t0, ended = {}, 0.0, None
    for line in (tmp / f"{name}.out").read_text().splitlines():
        a, b = line.split()
        if a == "start":
            t0 = float(b)
        elif a == "end":
            ended = b == "true"
        else:
            marks_at[int(a)] = float(b)
    return marks_at, t0, ended


def mark_cost(tmp: Path) -> float:
    """One marker's CPU seconds, from the child that ran markers alone."""
    m, t0, _ = read_marks(tmp, "marks")
    ts = [t0] + [m[i] for i in range(len(m))]
    return statistics.mean(b - a for a, b in zip(ts, ts[1:]))


def phrase_times(order, tmp: Path, mark_s: float) -> tuple[dict[str, dict[int, float]], dict]:
    """Each child's CPU seconds per phrase measured, less a marker's
    ({"trust": {i: s}, "replay": ...}), and per child the figures: phrases
    measured and whether it loaded all."""
    per, out = {}, {}
    for name in ("trust", "replay"):
        m, t0, ended = read_marks(tmp, name)
        prev = m.get(-1, t0)
        d = {}
        for i in range(len(order)):
            if i not in m:
                break
            d[i] = max(0.0, m[i] - prev - mark_s)
            prev = m[i]
        per[name] = d
        out[f"{name}_phrases"] = len(d)
        out[f"{name}_loaded_all"] = ended
        print(f"bytecode {name}: {len(d)} of {len(order)} phrases measured, {sum(d.values()):.1f} s CPU"
              f"{' (budget reached)' if len(d) < len(order) else ''}; ended {ended}", flush=True)
    return per, out


def fit_phrases(order, per: dict[str, dict[int, float]]) -> tuple[tuple[float, float, float, float], dict]:
    """The fit: under trust every phrase costs a + b * KB, under replay a
    proof c + d * KB more; (a, b, c, d) and the figures."""
    n = min(len(per["trust"]), len(per["replay"]))
    xs = [order[i][1].kb for i in range(len(per["trust"]))]
    a, b = fit(xs, [per["trust"][i] for i in range(len(xs))])
    proofs = [i for i in range(n) if order[i][1].theorem is not None]
    extra = [per["replay"][i] - (a + b * order[i][1].kb) for i in proofs]
    c, d = fit([order[i][1].kb for i in proofs], extra)
    plain = [i for i in range(n) if order[i][1].theorem is None]
    drift = (sum(per["replay"][i] for i in plain) / max(1e-9, sum(per["trust"][i] for i in plain)))
    print(f"fit, trust (every phrase): {1000 * a:.2f} ms + {1000 * b:.2f} ms/KB over {len(xs)} phrases; "
          f"replay, a proof's extra: {1000 * c:.1f} ms + {1000 * d:.1f} ms/KB over {len(proofs)} proofs; "
          f"non-proof phrases cost x{drift:.2f} in the replay child (noise of a shared host)")
    return (a, b, c, d), {"trust_fit": {"phrase_s": a, "per_kb_s": b, "phrases": len(xs)},
                          "replay_fit": {"proof_s": c, "proof_per_kb_s": d, "proofs": len(proofs)},
                          "replay_over_trust_non_proof": drift}


def per_file(order, per: dict[str, dict[int, float]], coefficients: tuple[float, float, float, float],
             show) -> dict[Path, dict]:
    """Per file of the phrases both children reached: phrases, proofs, KB,
    and measured and fitted seconds under trust and replay; printed as a table."""
    a, b, c, d = coefficients
    n = min(len(per["trust"]), len(per["replay"]))
    files = defaultdict(lambda: {"phrases": 0, "proofs": 0, "kb": 0.0, "trust": 0.0, "trust_fit": 0.0,
                                 "replay": 0.0, "replay_fit": 0.0})
    for i in range(n):
        f, ph = order[i]
        r = files[f]
        r["phrases"] += 1
        r["kb"] += ph.kb
        r["trust"] += per["trust"][i]
        r["replay"] += per["replay"][i]
        base = a + b * ph.kb
        r["trust_fit"] += base
        r["replay_fit"] += base + ((c + d * ph.kb) if ph.theorem is not None else 0.0)
        r["proofs"] += ph.theorem is not None
    print(f"{'file':34} {'phrases':>7} {'proofs':>6} {'KB':>7} {'trust s':>8} {'fit':>7} {'err':>6} "
          f"{'replay s':>9} {'fit':>7} {'err':>6}")
    for f, r in files.items():
        def err(x, y):
            return f"{100 * (y - x) / x:+.0f}%" if x > 0.05 else "-"
        print(f"{show(f):34} {r['phrases']:7d} {r['proofs']:6d} {r['kb']:7.1f} {r['trust']:8.2f} "
              f"{r['trust_fit']:7.2f} {err(r['trust'], r['trust_fit']):>6} {r['replay']:9.2f} "
              f"{r['replay_fit']:7.2f} {err(r['replay'], r['replay_fit']):>6}")
    return files


def print_measured(order, per: dict[str, dict[int, float]], show) -> None:
    """Print the files whose every phrase was measured, as entries of
    load_model.MEASURED_BYTECODE."""
    print("measured files (load_model.MEASURED_BYTECODE: (file, sha256[:12]) -> (trust s, replay s or None)):")
    for f in dict.fromkeys(f for f, _ in order):
        ids = [i for i, (g, _) in enumerate(order) if g == f]
        if not all(i in per["trust"] for i in ids):
            continue
        trust_s = sum(per["trust"][i] for i in ids)
        replay_s = sum(per["replay"][i] for i in ids) if all(i in per["replay"] for i in ids) else None
        digest = hashlib.sha256(f.read_bytes()).hexdigest()[:12]
        print(f'    ("{show(f)}", "{digest}"): ({trust_s:.2f}, '
              f'{"None" if replay_s is None else f"{replay_s:.2f}"}),')


def bytecode(args, order, tmp: Path) -> dict:
    """The bytecode figures: the boot, a marker's cost, the phrases each
    child measured, the fit, and per file the measured and fitted seconds."""
    install = find_hol_light(args.hol_light)
    boot = run_toplevel(args, install, write_driver(args, order, tmp))
    mark_s = mark_cost(tmp)
    out = {"boot_cpu_s": boot, "mark_ms": 1000 * mark_s, "load": load_avg()}
    per, measured = phrase_times(order, tmp, mark_s)
    out.update(measured)
    coefficients, fitted = fit_phrases(order, per)
    out.update(fitted)
    show = FileLoads(args.root, install.hol_dir).graph.show
    files = per_file(order, per, coefficients, show)
    out["files"] = {show(f): r for f, r in files.items()}
    print_measured(order, per, show)
    return out


def native(args, tmp: Path) -> dict:
    from runner.provers.hol_light.native.native_build import build_native
    from runner.provers.hol_light.native.native_compile import NativeCompiler, Scope

    install = find_hol_light(args.hol_light)
    build = build_native(install, None)
    units: list[dict] = []
    deadline = time.monotonic() + args.compile_budget

    class Stop(Exception):
        pass

    class Timed(NativeCompiler):
        def _compile_unit(self, source, folder, module, opens):
            if time.monotonic() > deadline:
                raise Stop()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.monotonic()
            super()._compile_unit(source, folder, module, opens)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            units.append({"module": module, "kb": len(source.encode()) / 1024,
                          "cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
                          "wall_s": time.monotonic() - t,
                          "plugin": str(folder / f"{module.lower()}.cmxs")})

    from runner.checks.context_proofs import ContextProofs

    choice = ContextProofs(args.native_choice)
    work = tmp / f"native-{choice}"
    # Under trust every library is compiled with the switchable prove opened
    # (native_compile.TRUST_OPEN), as a trusting session compiles it.
    compiler = Timed(build, install, Path(args.root).resolve(), work, choice)
    compiler.libdir = tmp / f"libs-{choice}"   # not the shared cache: compile everything here
    compiler.libdir.mkdir()
    print(f"native: compiling {args.file}'s libraries (budget {args.compile_budget:.0f} s wall), "
          f"load {load_avg()}", flush=True)
    t = time.monotonic()
    complete = True
    try:
        compiler.compile_context(f'needs "{args.file}";;\n', "Pb_bench", Scope(compiler.base_opens))
    except Stop:
        complete = False
    wall = time.monotonic() - t
    kb = sum(u["kb"] for u in units)
    cpu = sum(u["cpu_s"] for u in units)
    chunk_s, per_kb = fit([u["kb"] for u in units], [u["cpu_s"] for u in units])
    print(f"native compile: {len(units)} modules, {kb:.0f} KB of source, {cpu:.1f} s CPU, {wall:.0f} s "
          f"wall{'' if complete else ' (budget reached: a prefix)'}; fit {chunk_s:.2f} s/module + "
          f"{1000 * per_kb:.1f} ms/KB; load {load_avg()}", flush=True)
    out = {"compile_units": len(units), "compile_kb": kb, "compile_cpu_s": cpu, "compile_wall_s": wall,
           "compile_complete": complete, "compile_fit": {"chunk_s": chunk_s, "per_kb_s": per_kb},
           "units": units, "load": load_avg()}
    plugins = [u["plugin"] for u in units]
    trust = choice is ContextProofs.TRUST
    for label, trust, pre in (("nothing", trust, []), (str(choice), trust, plugins)):
        cpu_s = server_ready(build, args.root, tmp, trust, pre)
        out[f"server_{label}_cpu_s"] = cpu_s
        print(f"native server to READY, {len(pre)} plugins preloaded ({label}): {cpu_s:.2f} s CPU, "
              f"load {load_avg()}", flush=True)
    return out


def server_ready(build, root, tmp: Path, trust: bool, plugins: list[str]) -> float:
    """CPU seconds of the native server from start to READY, then QUIT."""
    fifo = tmp / "fifo"
    fifo.mkdir(exist_ok=True)
    cmd, rep = fifo / "cmd", fifo / "rep"
    for p in (cmd, rep):
        p.unlink(missing_ok=True)
        os.mkfifo(p, 0o600)
    rep_fd = os.open(rep, os.O_RDONLY | os.O_NONBLOCK)
    proc = subprocess.Popen(["prlimit", f"--stack={1 << 30}", "--", str(build.server),
                             *(["--trust"] if trust else []), str(cmd), str(rep), *plugins],
                            cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    buf = b""
    deadline = time.monotonic() + 1800
    while b"\n" not in buf and time.monotonic() < deadline and proc.poll() is None:
        select.select([rep_fd], [], [], 1.0)
        try:
            buf += os.read(rep_fd, 4096)
        except BlockingIOError:
            pass
    if buf.startswith(b"READY"):
        with open(cmd, "w") as c:
            c.write("QUIT\n")
    else:
        proc.kill()
    _, status, usage = os.wait4(proc.pid, 0)
    os.close(rep_fd)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = common.arg_parser(__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path("/work/bench/s2n-bignum"))
    ap.add_argument("--hol-light", type=Path, default=Path("/work/bench/hol-light"))
    ap.add_argument("--file", default="arm/proofs/base.ml")
    ap.add_argument("--budget", type=float, default=150.0, help="CPU seconds per bytecode child")
    ap.add_argument("--compile-budget", type=float, default=300.0, help="wall seconds of native compiles")
    ap.add_argument("--native-choice", choices=("replay", "trust"), default="replay",
                    help="compile and load the libraries natively as this --context-proofs does")
    ap.add_argument("--skip-bytecode", action="store_true")
    ap.add_argument("--skip-native", action="store_true")
    args = ap.parse_args()
    with common.text_to_stderr(args):
        out = measure(args)
    if args.json:
        print(json.dumps(out, default=str))
    return 0


def measure(args) -> dict:
    install = find_hol_light(args.hol_light)
    files = FileLoads(args.root, install.hol_dir, keep_text=True)
    order = files.order(Path(args.root) / args.file)
    nfiles = len({f for f, _ in order})
    print(f"{args.file}: {len(order)} phrases in {nfiles} files, {sum(p.kb for _, p in order):.0f} KB, "
          f"{sum(p.theorem is not None for _, p in order)} proof phrases; load {load_avg()}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="proofbatch-load-cost-"))
    out = {"file": args.file, "phrases": len(order), "files": nfiles}
    if not args.skip_native:
        out["native"] = native(args, tmp)
    if not args.skip_bytecode:
        out["bytecode"] = bytecode(args, order, tmp)
    return out


if __name__ == "__main__":
    sys.exit(main())
