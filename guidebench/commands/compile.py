"""`guidebench compile` (compile a program with an optimizer recipe) and `guidebench optimizers` (list them)."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from guidebench.errors import GuidebenchError
from guidebench.commands import add_api_base, add_cycles_model, add_tracking_uri
from guidebench.cluster import add_cluster_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `compile` and `optimizers` subcommands."""
    parser = subparsers.add_parser(
        "compile", help="compile a program with a DSPy optimizer, evaluate it on dev and test",
        description="Compile a program on the train split with an optimizer recipe (selecting on dev), "
                    "evaluate it on dev and test, compare it with the uncompiled program on test (paired "
                    "interval), save its state JSON and log everything to MLflow. --dry-run only estimates.")
    parser.add_argument("--program", metavar="NAME", help="program to compile (see `guidebench programs`)")
    parser.add_argument("--optimizer", metavar="NAME", help="optimizer recipe (see `guidebench optimizers`)")
    parser.add_argument("--data", type=Path, metavar="DIR", help="dataset folder (train/dev/test)")
    parser.add_argument("--recipe", type=Path, metavar="FILE",
                        help="recipe file (TOML or YAML) with the optimizer's settings; default: its documented defaults")
    parser.add_argument("--lm", default=None, metavar="SPEC",
                        help="task LM: `local` (embedded Gemma 3 270M, default), `fake`, or a LiteLLM model string")
    add_api_base(parser)
    parser.add_argument("--temperature", type=float, default=None, metavar="T",
                        help="the LM's temperature for the compile and its evaluations (default 0.2)")
    parser.add_argument("--rules", default=None, metavar="A+B",
                        help="a rule-gated program's gate (full_auto.hybrid): the rules that decide before its LM, "
                             "joined by + (default: the program's own); `guidebench search` prints the best trial's")
    parser.add_argument("--seed", type=int, default=None, help="seed of the optimizer and of the intervals (default 0)")
    parser.add_argument("--max-lm-calls", type=int, default=None, metavar="N",
                        help="stop the compile cleanly after N new LM calls (the best program so far is kept)")
    parser.add_argument("--max-tokens", type=int, default=None, metavar="N",
                        help="stop the compile cleanly after N new tokens")
    parser.add_argument("--dry-run", action="store_true",
                        help="print an estimate of LM calls and tokens and exit (no LM call)")
    parser.add_argument("--resume", metavar="RUN_ID",
                        help="resume an interrupted compile (its MLflow run id); finished LM work is not repeated")
    parser.add_argument("--baseline", metavar="NAME", help="program compared on test (default: --program, uncompiled)")
    parser.add_argument("--threads", type=int, default=1, metavar="N", help="records evaluated in parallel (default 1)")
    parser.add_argument("--eval-limit", type=int, default=None, metavar="N",
                        help="evaluate dev and test on a seeded subset of N records each (for a slow LM; the "
                             "subset's record ids are saved with the results)")
    parser.add_argument("--dev-limit", type=int, default=None, metavar="N",
                        help="evaluate dev on a seeded subset of N records (test stays whole unless --eval-limit); "
                             "the optimizer's own selection set is its recipe's max_val_examples")
    add_tracking_uri(parser)
    parser.add_argument("--fit-limit", type=int, default=None, metavar="N",
                        help="a trained program fits on at most N labeled train records, a seeded reservoir sample "
                             "(recorded in compile.json; default 200000): its memory stops growing with the split")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="output folder, new or empty (default GUIDEBENCH_HOME/compiles/<run id>)")
    parser.add_argument("--force", action="store_true", help="replace --out when it holds an earlier compile")
    parser.add_argument("--json", action="store_true", help="with --dry-run: print the estimate as JSON")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    add_cycles_model(parser)
    add_cluster_argument(parser)
    parser.set_defaults(func=run)

    listing = subparsers.add_parser("optimizers", help="list the optimizer recipes",
                                    description="List the optimizer recipes; --show NAME prints one recipe file "
                                                "with its documented defaults.")
    listing.add_argument("--show", metavar="NAME", help="print the recipe file of one optimizer")
    listing.set_defaults(func=list_optimizers)


def list_optimizers(args: argparse.Namespace) -> int:
    """Print the recipes (or one recipe file)."""
    import optimizers

    if args.show:
        try:
            recipe = optimizers.get(args.show)
        except optimizers.RecipeError as exc:
            raise GuidebenchError(str(exc)) from None
        print(recipe.render_toml(), end="")
        return 0
    recipes = optimizers.describe()  # from the recipe files: no DSPy import
    width = max(len(info.name) for info in recipes)
    print(f"{'name':<{width}}  {'DSPy class':<34} what it does")
    for info in recipes:
        print(f"{info.name:<{width}}  {info.dspy_name:<34} {info.summary}")
    print("\nrecipe files with the documented defaults: `guidebench optimizers --show NAME` "
          f"(packaged in {optimizers.recipe_file(optimizers.names()[0]).parent})")
    return 0


def _request(args: argparse.Namespace):  # -> CompileRequest
    from guidebench.compile import CompileRequest, resume_request

    if args.resume:
        request = resume_request(args.resume)
        for flag, value, stored in (("--program", args.program, request.program),
                                    ("--optimizer", args.optimizer, request.optimizer),
                                    ("--seed", args.seed, request.seed), ("--rules", args.rules, request.rules),
                                    ("--temperature", args.temperature, request.temperature)):
            if value is not None and value != stored:
                raise GuidebenchError(f"--resume {args.resume}: {flag} {value} differs from the interrupted "
                                      f"compile's {stored}")
        if args.data is not None and Path(args.data).resolve() != Path(request.data).resolve():
            raise GuidebenchError(f"--resume {args.resume}: --data {args.data} differs from {request.data}")
        # A resume may change the budget (new LM work only) and shrink the evaluation subset (a smaller
        # --eval-limit keeps a prefix of the same seeded sample, so finished evaluations stay cached).
        if args.max_lm_calls is not None:
            request.max_lm_calls = args.max_lm_calls
        if args.max_tokens is not None:
            request.max_tokens = args.max_tokens
        if args.eval_limit is not None:
            if args.eval_limit < 1:
                raise GuidebenchError(f"--eval-limit {args.eval_limit}: must be at least 1")
            request.eval_limit = args.eval_limit
        return request
    missing = [flag for flag, value in (("--program", args.program), ("--optimizer", args.optimizer),
                                        ("--data", args.data)) if value is None]
    if missing:
        raise GuidebenchError(f"compile needs {', '.join(missing)} (or --resume RUN_ID)")
    for flag, value in (("--max-lm-calls", args.max_lm_calls), ("--max-tokens", args.max_tokens)):
        if value is not None and value < 0:
            raise GuidebenchError(f"{flag} {value}: must be 0 or more")
    if args.threads < 1:
        raise GuidebenchError(f"--threads {args.threads}: must be at least 1")
    for flag, value in (("--eval-limit", args.eval_limit), ("--dev-limit", args.dev_limit)):
        if value is not None and value < 1:
            raise GuidebenchError(f"{flag} {value}: must be at least 1")
    if args.fit_limit is not None and args.fit_limit < 1:
        raise GuidebenchError(f"--fit-limit {args.fit_limit}: must be at least 1")
    if args.temperature is not None and not 0.0 <= args.temperature <= 2.0:
        raise GuidebenchError(f"--temperature {args.temperature}: must be between 0 and 2")
    if args.recipe is not None and not Path(args.recipe).is_file():
        raise GuidebenchError(f"--recipe {args.recipe}: no such file")
    return CompileRequest(program=args.program, optimizer=args.optimizer, data=str(Path(args.data).resolve()),
                          recipe=str(Path(args.recipe).resolve()) if args.recipe else None,
                          lm=args.lm or "local", seed=args.seed if args.seed is not None else 0,
                          max_lm_calls=args.max_lm_calls, max_tokens=args.max_tokens, baseline=args.baseline,
                          threads=args.threads, eval_limit=args.eval_limit, dev_limit=args.dev_limit,
                          tracking_uri=args.tracking_uri, out=str(Path(args.out).resolve()) if args.out else None,
                          rules=args.rules, temperature=args.temperature, cycles_model=args.cycles_model,
                          **({} if args.fit_limit is None else {"fit_limit": args.fit_limit}))


def run(args: argparse.Namespace) -> int:
    """Estimate (--dry-run) or run the compile."""
    from guidebench.compile import estimate, run_compile

    request = _request(args)
    if args.dry_run:
        cost, data = estimate(request)
        if args.json:
            print(json.dumps(cost.to_dict(), indent=2))
        else:
            print(f"dry run: {request.program} with {cost.recipe} on {request.data} "
                  f"(dataset {data.dataset_id[:12]}); no LM call was made\n")
            print(cost.render())
        return 0
    outcome = run_compile(request, resume_run_id=args.resume, progress=not args.no_progress, force=args.force)
    compiled = outcome.summary["compile"]
    print(f"\ncompiled state: {outcome.files['program']}")
    print(f"summary: {outcome.files['compile']}")
    usage = compiled.get("usage", {})
    print(f"compile: {usage.get('lm_calls', 0)} LM calls ({usage.get('cache_hits', 0)} from cache), "
          f"{usage.get('total_tokens', 0)} tokens, {compiled.get('wall_s', 0):.0f} s"
          + (f"; stopped by budget: {compiled.get('stop_reason')}" if compiled.get("stopped_by_budget") else ""))
    if outcome.run_id:
        # The run id is what `guidebench export` takes: say so with the command to copy.
        tracking = f" --tracking-uri {shlex.quote(request.tracking_uri)}" if request.tracking_uri else ""
        print(f"MLflow run {outcome.run_id}; export it with: guidebench export {outcome.run_id} --name NAME "
              f"--version 0.1.0 --out DIR{tracking}")
    return 0
