"""The shape of the code, checked: packages by job, every module importable alone, no import cycles, `model/`
importing nothing else of the project, and a README whose Python lines run, whose config table is the
dataclasses' whose layout names every package (docs/layout.md every module); and the tests' own layout: each
tests/test_X.py names module X in its docstring or is one of the behaviour files, and every module is named by
the docstring of a test file.

    python -m pytest tests/test_layout.py -q
"""

import ast
import dataclasses
import os
import re
import subprocess
import sys
import textwrap

import pytest

import train
from data.config import DataConfig
from model.config import GPTConfig
from tests.conftest import ROOT, TINY
from training.config import LogConfig, TrainConfig

PACKAGES = ("cli", "common", "data", "data/corpora", "hf", "inference", "inspection", "inspection/views", "model", "model/speed",
            "storage", "training")
SCRIPTS = ("train", "generate")
README = (ROOT / "README.md").read_text(encoding="utf-8")


def project_modules(root=ROOT) -> dict[str, "os.PathLike"]:
    """Dotted name -> file of every module of the project (a package is its __init__.py)."""
    modules = {name: root / f"{name}.py" for name in SCRIPTS}
    for package in PACKAGES:
        dotted = package.replace("/", ".")
        for file in sorted((root / package).glob("*.py")):
            modules[dotted if file.stem == "__init__" else f"{dotted}.{file.stem}"] = file
    return modules


def imported(name: str, file, modules) -> set[str]:
    """The project modules that importing `name` imports, function-level imports included. Importing a.b
    runs a/__init__.py first, so a's package counts too, except where it is one of `name`'s own packages
    (Python has started those before `name`, so that import never waits on them)."""
    found = set()
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                       for a in node.names]  # fmt: skip
        else:
            continue
        for target in targets:
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                own_package = name == prefix or name.startswith(prefix + ".")
                if prefix in modules and not own_package:
                    found.add(prefix)
    return found


def import_graph(root=ROOT) -> dict[str, set[str]]:
    modules = project_modules(root)
    return {name: imported(name, file, modules) for name, file in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A list of modules that import each other round a circle (the first again at its end), or None."""
    state, path = {}, []  # state: 1 while on the path, 2 when done

    def visit(node):
        state[node], path[len(path):] = 1, [node]
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    return next((cycle for node in sorted(graph) if node not in state and (cycle := visit(node))), None)


def test_no_two_modules_import_each_other_even_round_a_circle():
    assert find_cycle(import_graph()) is None, " -> ".join(find_cycle(import_graph()))


def test_the_cycle_finder_finds_a_circle_through_a_package_init():
    # inference.runs -> inspection.labels runs inspection/__init__.py, which imports inspection.maps, which
    # imports inference.runs: the cycle that broke `from inference import load_run` in a fresh interpreter
    graph = {"inference.runs": {"inspection", "inspection.labels"}, "inspection": {"inspection.maps"},
             "inspection.labels": set(), "inspection.maps": {"inference.runs"}}  # fmt: skip
    assert find_cycle(graph) == ["inference.runs", "inspection", "inspection.maps", "inference.runs"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


MAX_LINES, MAX_PARAMETERS = 60, 8  # a function a reader takes in at once (the 2026-12-05 style review)


def oversized_functions(source: str, where: str) -> list[str]:
    """The functions of `source` over MAX_LINES lines (its decorators and docstring included) or MAX_PARAMETERS
    parameters (self and cls not counted), as "where:name (lines, parameters)"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            named = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs] + [x.arg for x in (a.vararg, a.kwarg) if x]
            parameters = len([x for x in named if x not in ("self", "cls")])
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_LINES or parameters > MAX_PARAMETERS:
                found.append(f"{where}:{node.name} ({lines} lines, {parameters} parameters)")
    return found


def test_no_function_of_the_product_is_over_60_lines_or_8_parameters():
    found = [f for name, file in project_modules().items() for f in oversized_functions(file.read_text("utf-8"), name)]
    assert found == []


def test_the_size_check_finds_a_long_function_and_one_of_many_parameters():
    long = "def long():\n" + "    x = 1\n" * MAX_LINES
    many = "class A:\n    def many(self, a, b, c, d, e, f, g, h, *rest):\n        pass\n"
    fine = "def fine(a, b, c, d, e, f, g, h):\n" + "    x = 1\n" * (MAX_LINES - 1)
    assert oversized_functions(long + many + fine, "m") == ["m:long (61 lines, 0 parameters)",
                                                           "m:many (2 lines, 9 parameters)"]


# The functions that take a language: the texts of a view (shown in a notebook's language or the terminal's), the
# page and the pictures (a page switches language in place), the language's own functions, and the doors that hand it
# to a page or to a command's process. Every other function says its lines in the terminal's language, which the
# command sets once where it starts (cli.messages.use_language): none that computes a number takes one.
TAKE_A_LANGUAGE = {
    "cli.messages": {"check_language", "use_language", "messages"},
    "inspection.plot": {"draw_layer", "draw_head", "draw_patch", "patch_title", "save_layer_png"},
    "inspection.html": {"page", "frames_page"}, "inspection.files": {"writers", "write_records"},
    "inspection.heldout": {"where"}, "inspection.views.maps": {"text", "format_stats_table"},
    "inspection.views.roles": {"text", "format_roles_table", "label", "labels"},
    **{f"inspection.views.{view}": {"text"} for view in ("lens", "patch", "path", "score", "walkthrough", "why", "words")},
    "inspection.over_training": {"over_training_page", "format_snapshot_table"}, "inspection.notebook": {"language"},
    "inspection.notebook_live": {"train", "watch", "__init__"}, "inspection.live_server": {"__init__"},
    "inspection.watch_server": {"serve_runs", "watching", "__init__"}, "training.plots": {"plot_losses", "plot_heads"},
}


def test_only_texts_pages_and_pictures_take_a_language():
    taking = {}
    for name, file in project_modules().items():
        for node in ast.walk(ast.parse(file.read_text("utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if "lang" in [x.arg for x in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]:
                    taking.setdefault(name, set()).add(node.name)
    assert taking == TAKE_A_LANGUAGE
    product = [file.read_text("utf-8") for file in project_modules().values()]
    assert not [text for text in product if re.search(r"\brun\.lang\b", text)]  # no language rides on a Run


GROUND = {"cli", "cli.errors", "cli.arguments"}  # the error a user is shown, the checks of what a user passes


def test_model_imports_nothing_else_of_the_project_but_the_ground_floor():
    graph = import_graph()
    outside = {name: sorted(t for t in targets if t.split(".")[0] != "model" and t not in GROUND)
               for name, targets in graph.items() if name.split(".")[0] == "model"}  # fmt: skip
    assert {name: t for name, t in outside.items() if t} == {}
    assert {t for name in GROUND for t in graph.get(name, ())} <= GROUND  # and the ground floor nothing above it


PRELOAD = "import numpy, safetensors.torch, tokenizers, torch, tqdm"  # what most modules import, once


@pytest.mark.slow
def test_every_module_imports_alone_in_a_fresh_interpreter():
    # One interpreter imports the third-party libraries, then forks a child per module: each child has no
    # module of the project yet, exactly as a fresh interpreter, without paying torch's import 55 times.
    script = textwrap.dedent(f"""
        import importlib, os, sys, traceback
        {PRELOAD}
        failed = []
        for name in sys.argv[1:]:
            pid = os.fork()
            if pid == 0:
                try:
                    importlib.import_module(name)
                except BaseException:
                    traceback.print_exc()
                    os._exit(1)
                os._exit(0)
            if os.waitpid(pid, 0)[1]:
                failed.append(name)
        print(" ".join(failed))
    """)
    names = sorted(project_modules())
    assert len(names) > 40
    result = subprocess.run([sys.executable, "-c", script, *names], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)  # fmt: skip
    assert result.returncode == 0 and result.stdout.strip() == "", result.stderr[-3000:]


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.S)


@pytest.mark.slow
def minimal_gpt_sizes(readme: str) -> dict[str, int]:
    """The line counts a README's "Readable" item gives the files of the minimal GPT: {path: lines}."""
    item = readme[: readme.index("model/speed/")]  # the item ends where it names the speed layer
    return {path: int(n) for path, n in re.findall(r"`([\w/]+\.py)`\s*\((\d+)(?: lines|줄)?\)", item)}


def test_both_readmes_give_the_minimal_gpt_s_files_their_line_counts():
    for name in ("README.md", "README.ko.md"):
        sizes = minimal_gpt_sizes((ROOT / name).read_text(encoding="utf-8"))
        assert len(sizes) == 8, (name, sizes)
        actual = {path: len((ROOT / path).read_text(encoding="utf-8").splitlines()) for path in sizes}
        assert sizes == actual, name
    assert minimal_gpt_sizes("`a.py` (3 lines), `b.py`(4줄), `c.py` (5) model/speed/") == {"a.py": 3, "b.py": 4, "c.py": 5}


def test_the_readme_s_import_lines_work_in_a_fresh_interpreter():
    lines = [line for block in python_blocks(README) for line in block.splitlines()
             if re.match(r"(from \S+ )?import ", line)]  # fmt: skip
    assert "from inference import load_run, generate_text, score_text" in lines
    if any("transformers" in line for line in lines):
        pytest.importorskip("transformers")
    result = subprocess.run([sys.executable, "-c", "\n".join(lines)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.slow
def test_the_readme_s_notebook_example_runs_on_a_trained_run(tmp_path, data_cache):
    # the README's notebook block, as written, in a directory whose runs/ holds two tiny runs (runs/heads the newer)
    args = ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.sample_tokens=0"]
    for name in ("small", "heads"):
        assert train.main([*args, "--out", str(tmp_path / "runs" / name)]) == 0
    block = next(b for b in python_blocks(README) if "from inference import" in b)
    result = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip(), "the example printed nothing"


def toml_value(value) -> str:
    """A default as the README's table writes it: TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def test_the_readme_s_config_table_has_every_key_and_default_of_the_dataclasses():
    rows = re.findall(r"^\| `\[(\w+)\]` \| `(\w+)` \| `([^`]*)` \| (.+) \|$", README, flags=re.M)
    table = {(section, key): default for section, key, default, _ in rows}
    assert len(table) == len(rows), "a key is listed twice"
    expected = {}
    for section, cls in (("data", DataConfig), ("model", GPTConfig), ("train", TrainConfig), ("log", LogConfig)):
        for f in dataclasses.fields(cls):
            if not (cls is GPTConfig and f.name == "vocab_size"):  # the tokenizer's, not a key of [model]
                expected[section, f.name] = toml_value(f.default)
    assert table == expected


def test_the_layout_names_every_module_and_the_readme_every_package_and_stays_short():
    layout, readme_layout = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8"), README[README.index("## Layout"):]
    missing = [str(file.relative_to(ROOT)) for file in project_modules().values()
               if file.name != "__init__.py" and str(file.relative_to(ROOT)) not in layout]  # a package's __init__ is its package
    assert missing == []
    assert [p for p in PACKAGES + tuple(f"{s}.py" for s in SCRIPTS) if f"\n{p}" not in readme_layout] == []
    assert "docs/layout.md" in readme_layout
    for path, most in (("README.md", 375), ("train.py", 300)):  # a README for users, a train.py read top to bottom
        lines = (ROOT / path).read_text(encoding="utf-8").count("\n")
        assert lines <= most, f"{path} has {lines} lines; keep it to about 300 (the measurement record lives in docs/)"


# The tests' layout (README, Layout: tests/): tests/test_X.py tests module X and names it in its docstring (a bench/
# script counts); a module without a file of its own is named in the docstring of the file that tests it. These
# files are named for a behaviour that crosses modules instead:
BEHAVIOURS = {
    "bad_input": "bad input to any command: one error line, exit 2, nothing changed (a module's file may keep the "
                 "refusals of its own options)",
    "faults": "signals, kill -9, crashes in a save, full disks, read errors, two processes at once",
    "layout": "the shape of the code, the README and docs/layout.md",
    "gpu": "the CUDA paths, run for real (-m gpu)",
    "on_device": "the CUDA paths on a CPU: every inspection door with the model on a stand-in GPU (tests/fake_device.py)",
    "page": "the attention page in headless Chromium: what it opens on, its pictures and tables, the tour",
}


def named_paths(text: str, paths) -> set[str]:
    """The paths (model/kv_cache.py, train.py) that `text` names whole: "tests/test_train.py" names no train.py."""
    return {p for p in paths if re.search(rf"(?<![\w/.]){re.escape(p)}(?!\w)", text)}


def subject_of(path: str) -> str:
    """What a test file for this path is named after: model/kv_cache.py -> kv_cache, model/speed/__init__.py -> speed."""
    head, name = os.path.split(path)
    return os.path.basename(head) if name == "__init__.py" else os.path.splitext(name)[0]


def misplaced_tests(docstrings: dict[str, str], paths) -> list[str]:
    """The test files named neither for a behaviour nor for a module (or script) that their docstring names."""
    misplaced = []
    for name, doc in docstrings.items():
        subject = name.removeprefix("test_").removesuffix(".py")  # test_kv_cache.py -> kv_cache
        named = {subject_of(p) for p in named_paths(doc, paths)}
        if subject not in BEHAVIOURS and subject not in named:
            misplaced.append(name)
    return sorted(misplaced)


def unnamed_modules(docstrings: dict[str, str], modules) -> list[str]:
    """The modules that no test file's docstring names."""
    return sorted(set(modules) - set().union(*(named_paths(doc, modules) for doc in docstrings.values())))


def test_every_test_file_is_named_for_its_module_or_a_behaviour_and_every_module_is_named_by_one():
    docstrings = {f.name: ast.get_docstring(ast.parse(f.read_text(encoding="utf-8"))) or ""
                  for f in sorted((ROOT / "tests").glob("test_*.py"))}  # fmt: skip
    modules = [str(f.relative_to(ROOT)) for f in project_modules().values() if f.name != "__init__.py"]
    packages = [str(f.relative_to(ROOT)) for f in project_modules().values() if f.name == "__init__.py"]
    scripts = [str(f.relative_to(ROOT)) for f in sorted((ROOT / "bench").glob("*")) if f.suffix in (".py", ".sh")]
    assert misplaced_tests(docstrings, modules + packages + scripts) == []
    assert unnamed_modules(docstrings, modules) == []
    rule = next(line for line in README[README.index("## Layout"):].splitlines() if line.startswith("tests/"))
    assert [b for b in BEHAVIOURS if b not in rule] == []  # the README's line names every behaviour file


def test_the_test_layout_check_finds_a_file_named_for_no_module_and_a_module_no_file_names():
    docstrings = {"test_kv_cache.py": "The cache (model/kv_cache.py).", "test_sweep.py": "A sweep of bad input.",
                  "test_train.py": "python -m pytest tests/test_train.py -q", "test_bad_input.py": "Bad input.",
                  "test_config.py": "Config loading (training/config.py).", "test_gpu_check.py": "bench/gpu_check.sh"}
    paths = ["model/kv_cache.py", "model/gpt.py", "train.py", "training/config.py", "bench/gpu_check.sh"]
    assert misplaced_tests(docstrings, paths) == ["test_sweep.py", "test_train.py"]
    assert unnamed_modules(docstrings, paths[:4]) == ["model/gpt.py", "train.py"]


def commands(markdown: str) -> list[str]:
    """The command lines of a Markdown file's bash blocks, their comments left out."""
    blocks = re.findall(r"```bash\n(.*?)```", markdown, flags=re.S)
    return [re.sub(r"\s+#.*$", "", line).strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_the_korean_guide_runs_the_readme_s_commands_and_no_other():
    korean = (ROOT / "README.ko.md").read_text(encoding="utf-8")
    assert "README.ko.md" in README.split("\n\n")[1]  # linked from the top of the README
    ours = commands(korean)
    assert set(ours) <= set(commands(README)), set(ours) - set(commands(README))
    for part in ("pip install", "python -m pytest -q", "--data.source=", "--score", "--attention", "--explain", "--heads",
                 "--over-training", "--serve", "--lang ko", "hf.export_gpt2", "hf.import_gpt2", "configs/finetune.toml"):
        assert any(part in command for command in ours), part  # every part of the guide the README has
    for image in re.findall(r"!\[[^]]*\]\(([^)]+)\)", korean):
        assert (ROOT / image).is_file(), image
