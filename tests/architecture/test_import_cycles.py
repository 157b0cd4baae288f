"""No module imports itself back, counting a package's own __init__ as a module.

import-linter's acyclic_siblings contract (in `make test`) compares the children of a package; it does
not see a circle that runs through the parent package itself, such as kvset.cli.flags ->
kvset.cli.completion -> kvset.cli -> kvset.cli.flags. This test walks grimp's module graph (the one
import-linter builds, imports inside functions included) and fails on any strongly connected group.
"""

import grimp

PACKAGES = ("kvset", "kvset_tui")


def _circles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(imports[target]))))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == module:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_the_circle_finder_finds_a_circle_through_a_parent_package():
    imports = {"p": {"p.a"}, "p.a": {"p.b"}, "p.b": {"p"}, "p.c": {"p.a"}}
    assert _circles(imports) == [["p", "p.a", "p.b"]]
    assert _circles({"p": {"p.a"}, "p.a": set()}) == []


def test_no_module_of_kvset_or_kvset_tui_is_in_an_import_circle():
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    ours = set(graph.modules)
    imports = {m: set(graph.find_modules_directly_imported_by(m)) & ours for m in ours}
    assert _circles(imports) == []
