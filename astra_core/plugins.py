"""Building the plugin manager and the backend registry.

Plugins come from three places, in this order:

1. the ``astra`` entry-point group of installed distributions (the built-in
   backends are found this way too, exactly like third-party ones);
2. ``modules`` listed in ``plugins.toml`` (a local plugin without packaging);
3. modules named in the ``ASTRA_PLUGINS`` environment variable (comma-separated).

``plugins.toml`` (looked up in the current directory, then the repository root,
or given by ``ASTRA_PLUGINS_TOML``) may also set ``default_backend`` and a
``disabled`` list of plugin (entry-point) names; ``ASTRA_DISABLE_PLUGINS``
(comma-separated) and ``ASTRA_DEFAULT_BACKEND`` override them.

A broken plugin breaks nothing else. An installed plugin that cannot be
loaded, or whose registration hook raises, is set aside with a one-line
reason (:attr:`AstraPluginManager.broken`; ``astra backends`` lists it with
its distribution, and ``--backend`` naming it, or a backend it registered
before raising, gives that line) and every other backend keeps working. The host also guards what plugins hand
it: a backend registered without a
``config_type`` refuses a backend config, and an exception a plugin's
factory, backend ``run()`` or observer hook raises becomes a one-line
:class:`PluginError` naming the plugin (an observer's error after a run is a
warning: the result is kept).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy

from astra_core import hookspecs
from astra_core.errors import AstraError, BackendUnavailable, ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENTRY_POINT_GROUP = "astra"
#: The core's built-in backend (astra_core.analytical), registered by the core itself
#: as the plugin :data:`BUILTIN_PLUGIN`: every run has it, the estimator runs on it,
#: and it is the default backend unless settings choose another.
BUILTIN_DEFAULT_BACKEND = "analytical"
BUILTIN_PLUGIN = "astra-core"
#: Longest exception text quoted in a one-line plugin error.
_REASON_CHARS = 200
#: Packages whose frames are the host's, never a plugin's, when blaming an exception.
_HOST_PACKAGES = frozenset({"astra_core", "astra", "pluggy"})


#: What a plugin may raise that the host reports as that plugin's failure (one line
#: naming it) instead of letting it through: SystemExit too, since a plugin calling
#: ``sys.exit()`` would otherwise end astra silently (``astra backends`` printed
#: nothing and exited 0). KeyboardInterrupt still stops astra, and a backend's
#: MemoryError passes as it is (:data:`PASSED`): the process ran out of memory, not
#: the plugin, and a worker that hits it must end (:mod:`astra_core.workers`).
PLUGIN_FAILURES: tuple[type[BaseException], ...] = (Exception, SystemExit)
#: What a backend's factory or ``run()`` raises that passes unwrapped.
PASSED = (AstraError, MemoryError)


class PluginError(AstraError):
    """A plugin raised where the host called it: while loading or registering,
    in a backend factory, in a backend's ``run()`` or in an observer hook.

    The message is one line naming the plugin (and the backend or hook); the
    original exception is chained as ``__cause__`` for debugging."""


class PluginWarning(UserWarning):
    """An observer hook failed after a run had finished; the result is kept."""


def describe(exc: BaseException) -> str:
    """``"ValueError: first line of the message"``, at most ~200 characters; a first
    line that announces more (ends with ':', e.g. a traceback follows) gets the last line."""
    text = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if len(text) > 1 and text[0].endswith(":"):
        text = [f"{text[0]} {text[-1]}"]
    line = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return line if len(line) <= _REASON_CHARS else line[: _REASON_CHARS - 3] + "..."


class AstraPluginManager(pluggy.PluginManager):
    """pluggy's manager for project ``astra``, plus the plugins set aside as broken.

    ``broken`` maps plugin name -> one-line reason (an entry point that could
    not be loaded, a registration hook that raised); ``origins`` maps an entry
    point's plugin name -> the distribution it comes from (``astra-ns3 0.1``)."""

    def __init__(self) -> None:
        super().__init__("astra")
        self.broken: dict[str, str] = {}
        self.origins: dict[str, str] = {}


def _broken(pm: pluggy.PluginManager) -> dict[str, str]:
    broken = getattr(pm, "broken", None)
    if broken is None:  # a plain pluggy manager built by hand
        broken = {}
        try:
            pm.broken = broken  # type: ignore[attr-defined]  # astra's mark on the manager
        except AttributeError:  # pragma: no cover
            pass
    return broken


def broken_text(pm: pluggy.PluginManager, plugin: str, named: bool = False) -> str:
    """``plugin``'s one-line reason with its distribution where it came from one:
    ``broken plugin (distribution astra-foo 0.1): astra_register_backends raised
    RuntimeError: no licence`` (``named``: ``broken plugin 'foo' (...``)."""
    origin = getattr(pm, "origins", {}).get(plugin)
    name = f" '{plugin}'" if named else ""
    where = f" (distribution {origin})" if origin else ""
    return f"broken plugin{name}{where}: {_broken(pm).get(plugin, '?')}"


def _import_named(target: str) -> Any:
    """The object ``"package.module:name"`` names, importing its module."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def lazy_factory(target: str) -> Callable[..., Any]:
    """A backend factory for ``register`` that imports the real one, named
    ``"package.module:function"``, when a backend is first built: every astra run
    loads every installed plugin, so a plugin module stays cheap to import.
    Raises ValueError for a ``target`` that is not ``module:function``."""
    module, sep, attr = target.partition(":")
    if not (module and sep and attr):
        raise ValueError(f"lazy_factory: expected 'module:function', got {target!r}")

    def factory(topology: Any, config: Any = None) -> Any:
        return _import_named(target)(topology, config)

    factory.__qualname__ = f"lazy_factory({target!r})"
    return factory


@dataclass
class BackendInfo:
    """A registered network backend.

    ``factory(topology, config)`` is the host's guarded call of the plugin's
    factory (see :meth:`build`); ``plugin_factory`` is the plugin's own.
    ``check_available()`` raises BackendUnavailable when the backend cannot run
    here (None: it always can); ``work_model(topology, config)`` builds its
    :class:`~astra_core.backend.WorkModel` (None: it prices no work). Both are
    given at registration."""

    name: str
    plugin_factory: Callable[..., Any]
    config_type: Any = None  # a class, or "module:Class" imported on demand
    description: str = ""
    plugin: str = "?"
    packages: frozenset[str] = frozenset()  # top-level packages whose errors are the plugin's
    check_available: Callable[[], None] | None = None
    work_model_factory: Callable[..., Any] | None = None
    outputs_factory: Callable[..., Any] | None = None

    def config_class(self) -> Any:
        """The backend's config class (importing it if it was named as a string)."""
        if isinstance(self.config_type, str):
            return _import_named(self.config_type)
        return self.config_type

    @property
    def factory(self) -> Callable[..., Any]:
        """``factory(topology, config=None)``: :meth:`build`."""
        return self.build

    def work_model(self, topology: Any, config: Any = None) -> Any:
        """The backend's :class:`~astra_core.backend.WorkModel` for ``topology`` and
        ``config`` (built by the ``work_model`` it registered), or None when it offers none.

        Raises ConfigError for a config a backend without ``config_type`` would
        ignore, AstraErrors as the plugin raises them (a bad config: its file and
        key), and PluginError naming the plugin for any other exception."""
        from astra_core.backend import work_model

        if self.config_type is None and not _is_empty_config(config):
            raise ConfigError(f"backend '{self.name}' takes no --backend-config (got {_show_config(config)})")
        try:
            return work_model(self.work_model_factory, topology, config)
        except PASSED:
            raise
        except PLUGIN_FAILURES as exc:
            raise PluginError(
                f"plugin '{self.plugin}': backend '{self.name}': its work model could not be built: "
                f"{describe(exc)}"
            ) from exc

    def output_files(self, config: Any = None) -> dict[str, Any]:
        """The files the backend writes under ``config``, label -> path (by the ``outputs``
        it registered; {} without one or without a config), so that a command checks them
        against its own outputs and inputs before the run
        (:func:`~astra_core.outputs.check_distinct`). Raises AstraErrors as the plugin
        raises them (a bad config: its file and key) and PluginError naming the plugin
        for any other exception."""
        if self.outputs_factory is None or _is_empty_config(config):
            return {}
        try:
            return dict(self.outputs_factory(config))
        except PASSED:
            raise
        except PLUGIN_FAILURES as exc:
            raise PluginError(
                f"plugin '{self.plugin}': backend '{self.name}': its output files could not be listed: "
                f"{describe(exc)}"
            ) from exc

    def build(self, topology: Any, config: Any = None) -> Any:
        """A backend instance for ``topology`` with ``config`` (None: defaults).

        Raises ConfigError when the backend was registered without a
        ``config_type`` and a non-empty config is given (it would be ignored),
        BackendUnavailable and other AstraErrors as the plugin raises them, and
        PluginError naming the plugin for any other exception of the factory.
        Returns the instance wrapped in a :class:`GuardedBackend`, whose ``run()``
        is guarded the same way (errors raised in the plugin's own code become
        PluginError; the host's keep their type)."""
        if self.config_type is None and not _is_empty_config(config):
            raise ConfigError(f"backend '{self.name}' takes no --backend-config (got {_show_config(config)})")
        try:
            backend = self.plugin_factory(topology, config)
        except PASSED:
            raise
        except PLUGIN_FAILURES as exc:
            raise PluginError(
                f"plugin '{self.plugin}': backend '{self.name}' could not be built: {describe(exc)}"
            ) from exc
        run = getattr(backend, "run", None)
        if not callable(run):
            raise PluginError(
                f"plugin '{self.plugin}': backend '{self.name}': the factory "
                f"returned {type(backend).__name__}, which has no run()"
            )
        packages = self.packages | {_top_package(type(backend).__module__)}
        guarded = GuardedBackend(backend, self.plugin, self.name, packages - _HOST_PACKAGES)
        for built in _RECORDINGS:
            built.append(guarded)
        return guarded


#: The lists of the open :func:`backends_built` blocks.
_RECORDINGS: list[list[Any]] = []


@contextmanager
def backends_built() -> Iterator[list[Any]]:
    """The backends astra builds inside the block (:meth:`BackendInfo.build`), in order:
    a run's result holds no live backend, so a test or a tool that reads a backend's
    own state after a run takes it from here (the last one built ran the step)."""
    built: list[Any] = []
    _RECORDINGS.append(built)
    try:
        yield built
    finally:
        _RECORDINGS.remove(built)


def _is_empty_config(config: Any) -> bool:
    return config is None or (isinstance(config, Mapping) and not config)


def _show_config(config: Any) -> str:
    if isinstance(config, (str, os.PathLike)):
        return f"'{os.fspath(config)}'"
    if isinstance(config, Mapping):
        keys = [str(k) for k in config]
        more = f", ... ({len(keys)} keys)" if len(keys) > 3 else ""
        return "keys " + ", ".join(keys[:3]) + more
    return f"a {type(config).__name__}"


def _top_package(module: str | None) -> str:
    return (module or "").split(".")[0]


def _raised_in(exc: BaseException, packages: frozenset[str] | set[str]) -> bool:
    """Whether the innermost frame of ``exc`` that belongs to astra or to ``packages``
    is the plugin's (standard-library and other third-party frames are skipped)."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        top = _top_package(frame.f_globals.get("__name__"))
        if top in packages:
            return True
        if top in _HOST_PACKAGES:
            return False
    return False


class GuardedBackend:
    """A plugin's backend as the host holds it: a proxy whose every attribute is the
    backend's own (read and written through), except ``run()``, which turns an
    exception raised in the plugin's code (``packages``) into a one-line
    :class:`PluginError` naming ``plugin`` and ``backend_name``; an AstraError, or an
    exception of the host's code that the backend called back, keeps its type.

    The per-message calls (``now``, ``schedule``, ``send``) are the backend's own
    bound methods, set on the proxy once: the hot path pays no extra call. The
    backend itself is ``wrapped``."""

    __slots__ = ("wrapped", "_plugin", "_backend_name", "_packages", "now", "schedule", "send")

    def __init__(self, backend: Any, plugin: str, backend_name: str, packages: frozenset[str] | set[str]):
        own = object.__setattr__
        own(self, "wrapped", backend)
        own(self, "_plugin", plugin)
        own(self, "_backend_name", backend_name)
        own(self, "_packages", frozenset(packages))
        for name in ("now", "schedule", "send"):
            own(self, name, getattr(backend, name, None))

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """The backend's ``run()``, guarded (see the class)."""
        try:
            return self.wrapped.run(*args, **kwargs)
        except PASSED:
            raise
        except PLUGIN_FAILURES as exc:
            if _raised_in(exc, self._packages):
                raise PluginError(
                    f"plugin '{self._plugin}': backend '{self._backend_name}' failed in run(): "
                    f"{describe(exc)}"
                ) from exc
            raise  # the host's bug (e.g. in a callback the backend ran): keep its traceback

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.wrapped, name, value)

    def __repr__(self) -> str:
        return f"GuardedBackend({self.wrapped!r})"


@dataclass
class PluginSettings:
    """What plugins.toml and the environment say."""

    default_backend: str = BUILTIN_DEFAULT_BACKEND
    disabled: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    source: str | None = None


def _find_plugins_toml() -> Path | None:
    explicit = os.environ.get("ASTRA_PLUGINS_TOML")
    if explicit:
        return Path(explicit)
    for candidate in (Path.cwd() / "plugins.toml", Path(__file__).resolve().parents[1] / "plugins.toml"):
        if candidate.is_file():
            return candidate
    return None


def load_settings(path: Path | None = None) -> PluginSettings:
    """Read plugins.toml (if any) and apply environment overrides. Raises ConfigError."""
    path = path or _find_plugins_toml()
    settings = PluginSettings()
    if path is not None and path.is_file():
        try:
            data = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read plugin settings: {exc}") from None
        unknown = set(data) - {"default_backend", "disabled", "modules"}
        if unknown:
            raise ConfigError(
                f"{path}: unknown key '{sorted(unknown)[0]}' (known: default_backend, disabled, modules)"
            )
        settings.default_backend = str(data.get("default_backend", settings.default_backend))
        settings.disabled = [str(x) for x in data.get("disabled", [])]
        settings.modules = [str(x) for x in data.get("modules", [])]
        settings.source = str(path)
    env = os.environ
    if env.get("ASTRA_DEFAULT_BACKEND"):
        settings.default_backend = env["ASTRA_DEFAULT_BACKEND"]
    if env.get("ASTRA_DISABLE_PLUGINS"):
        settings.disabled += [x.strip() for x in env["ASTRA_DISABLE_PLUGINS"].split(",") if x.strip()]
    if env.get("ASTRA_PLUGINS"):
        settings.modules += [x.strip() for x in env["ASTRA_PLUGINS"].split(",") if x.strip()]
    return settings


class _Builtin:
    """The core's own plugin: the built-in backend and upstream's collective
    algorithms, registered through the same hooks as every plugin's."""

    @hookspecs.hookimpl
    def astra_register_collectives(self, register: hookspecs.RegisterCollective) -> None:
        from astra_core.system.collectives.registry import register_builtin_collectives

        register_builtin_collectives(register)

    @hookspecs.hookimpl
    def astra_register_backends(self, register: hookspecs.RegisterBackend) -> None:
        register(
            BUILTIN_DEFAULT_BACKEND,
            lazy_factory("astra_core.analytical:create"),
            description="congestion-unaware analytical model (upstream ASTRA-sim): "
            "hops x latency + bytes / bandwidth per message",
        )


def make_plugin_manager(
    *,
    autoload: bool = True,
    disabled: list[str] | None = None,
    modules: list[str] | None = None,
    settings: PluginSettings | None = None,
) -> AstraPluginManager:
    """A fresh plugin manager (no global state): entry points, then extra modules.

    An entry point or listed module that cannot be loaded (missing, or raising
    on import) is set aside in ``pm.broken`` with its reason; the others load
    (each run then warns about it, see :func:`notify_run_started`). Raises
    ConfigError for a misspelled hook."""
    settings = settings if settings is not None else load_settings()
    pm = AstraPluginManager()
    pm.add_hookspecs(hookspecs)
    pm.register(_Builtin(), name=BUILTIN_PLUGIN)  # before any blocking: it cannot be disabled
    blocked = set(settings.disabled) | set(disabled or [])
    for name in blocked - {BUILTIN_PLUGIN}:
        pm.set_blocked(name)
    if autoload:
        _load_entry_points(pm)
    for module_name in [*settings.modules, *(modules or [])]:
        if module_name in blocked or pm.has_plugin(module_name):
            continue
        try:
            module = importlib.import_module(module_name)
        except PLUGIN_FAILURES as exc:  # noqa: BLE001 - missing, or its own import failed
            pm.broken[module_name] = f"cannot be imported: {describe(exc)}"
            continue
        if not pm.is_registered(module):  # already loaded through its entry point
            try:
                pm.register(module, name=module_name)
            except pluggy.PluginValidationError as exc:
                raise ConfigError(f"plugin module '{module_name}': {exc}") from None
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise ConfigError(f"plugins: {exc}") from None
    return pm


def _load_entry_points(pm: AstraPluginManager) -> None:
    """Load the ``astra`` entry points one by one, so that one that fails to
    import (or to validate) is noted in ``pm.broken`` and the others load."""
    points = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    for ep in points:
        dist = getattr(ep, "dist", None)
        if dist is not None and ep.name not in pm.origins:
            pm.origins[ep.name] = f"{dist.metadata['Name']} {dist.version}"
    for name in sorted({ep.name for ep in points}):
        if pm.is_blocked(name) or pm.has_plugin(name):
            continue
        try:
            pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP, name=name)
        except PLUGIN_FAILURES as exc:  # noqa: BLE001 - anything a plugin raises while loading
            pm.broken[name] = f"cannot be loaded: {describe(exc)}"


def hook_callers(
    pm: pluggy.PluginManager, hook_name: str, *, call_order: bool = True
) -> list[tuple[str, Callable[..., Any]]]:
    """(plugin name, caller) per plugin implementing ``hook_name``: the caller calls the
    hook through the manager for that plugin alone (``pm.subset_hook_caller``).

    pluggy then does what it does for any call (passes each implementation only
    the arguments it names, runs the plugin's wrappers), and a caller can catch
    one plugin's error without stopping the others. Order: pluggy's call order
    (last registered first), or registration order with ``call_order=False``."""
    plugins = list(dict.fromkeys(impl.plugin for impl in getattr(pm.hook, hook_name).get_hookimpls()))
    if call_order:
        plugins.reverse()
    everyone = pm.get_plugins()
    return [
        (
            pm.get_name(plugin) or "?",
            pm.subset_hook_caller(hook_name, remove_plugins=[p for p in everyone if p is not plugin]),
        )
        for plugin in plugins
    ]


def _call_register_hook(
    pm: pluggy.PluginManager,
    hook_name: str,
    accept: Callable[[str, str, Any], None],
    make_register: Callable[[str, dict[str, Any]], Callable[..., None]],
) -> dict[str, str]:
    """Call each plugin's registration hook with its own ``register`` (registration
    order); commit what it registered only if the hook returned normally (else note
    the plugin as broken). Returns name -> plugin for what the broken plugins had
    registered before their hook raised."""
    broken = _broken(pm)
    lost: dict[str, str] = {}
    for plugin_name, call in hook_callers(pm, hook_name, call_order=False):
        staged: dict[str, Any] = {}
        try:
            call(register=make_register(plugin_name, staged))
        except _Duplicate:
            raise
        except PLUGIN_FAILURES as exc:  # noqa: BLE001 - a broken plugin breaks nothing else
            broken[plugin_name] = f"{hook_name} raised {describe(exc)}"
            lost.update(dict.fromkeys(staged, plugin_name))
            continue
        for name, item in staged.items():
            accept(plugin_name, name, item)
    return lost


class _Duplicate(AstraError):
    """Two plugins registered one name (the host's error, not one plugin's)."""


def _check_registration(name: Any, thing: Any, what: str) -> None:
    if not isinstance(name, str) or not name:
        raise TypeError(f"register(): the name must be a non-empty string, got {name!r}")
    if not callable(thing):
        raise TypeError(f"register({name!r}, ...): the {what} is not callable")


class BackendRegistry:
    """Backends contributed by the plugins of one plugin manager.

    A plugin whose ``astra_register_backends`` raises (or calls ``register``
    wrongly) contributes nothing and is noted in :attr:`broken`; the others
    register. Raises AstraError when two plugins register the same name."""

    def __init__(self, pm: pluggy.PluginManager, default: str = BUILTIN_DEFAULT_BACKEND):
        self.default = default
        self._pm = pm
        self.backends: dict[str, BackendInfo] = {}
        #: plugin name -> one-line reason it contributes nothing.
        self.broken: dict[str, str] = _broken(pm)

        def make_register(plugin_name: str, staged: dict[str, Any]):
            module = pm.get_plugin(plugin_name)
            plugin_package = _top_package(getattr(module, "__name__", None) or type(module).__module__)

            def register(
                name,
                factory,
                *,
                config_type=None,
                description="",
                check_available=None,
                work_model=None,
                outputs=None,
            ):
                _check_registration(name, factory, "factory")
                hooks = (
                    ("check_available", check_available),
                    ("work_model", work_model),
                    ("outputs", outputs),
                )
                for key, hook in hooks:
                    if hook is not None and not callable(hook):
                        raise TypeError(f"register({name!r}, ...): {key} is not callable")
                owner = self.backends.get(name)
                if owner is not None or name in staged:
                    first = owner.plugin if owner is not None else plugin_name
                    raise _Duplicate(f"backend '{name}' registered twice (by {first} and {plugin_name})")
                packages = frozenset({plugin_package, _top_package(getattr(factory, "__module__", None))})
                staged[name] = BackendInfo(
                    name,
                    factory,
                    config_type,
                    str(description),
                    plugin_name,
                    packages - _HOST_PACKAGES,
                    check_available,
                    work_model,
                    outputs,
                )

            return register

        def accept(plugin_name: str, name: str, info: BackendInfo) -> None:
            self.backends[name] = info

        #: backend name -> the broken plugin that registered it before its hook raised
        self.lost = _call_register_hook(pm, "astra_register_backends", accept, make_register)

    def names(self) -> list[str]:
        """Registered backend names, sorted."""
        return sorted(self.backends)

    def get(self, name: str | None) -> BackendInfo:
        """The backend called ``name`` (default if None). Raises AstraError: for a name
        that a broken plugin has (its own, or a backend it registered before its hook
        raised), the line ``astra backends`` gives that plugin; else ``unknown backend``."""
        name = name or self.default
        info = self.backends.get(name)
        plugin = self.lost.get(name, name if name in self.broken else None)
        if info is None and plugin is not None:
            text = broken_text(self._pm, plugin, named=plugin != name)
            raise AstraError(f"backend '{name}': unavailable — {text}")
        if info is None:
            available = ", ".join(self.names())
            broken = ""
            if self.broken:
                items = list(self.broken.items())
                shown = "; ".join(f"{plugin}: {reason}" for plugin, reason in items[:2])
                more = f"; and {len(items) - 2} more" if len(items) > 2 else ""
                broken = f"; broken plugins: {shown}{more}"
            raise AstraError(f"unknown backend '{name}'; available: {available}{broken}")
        return info

    def create(self, name: str | None, topology, config=None):
        """Build a backend instance (:meth:`BackendInfo.build`); BackendUnavailable
        propagates with its install hint."""
        return self.get(name).build(topology, config)

    def availability(self) -> list[tuple[str, bool, str]]:
        """(name, usable, description-or-reason) per backend, without running anything;
        then one row per broken plugin, named after the plugin."""
        rows = []
        for name in self.names():
            info = self.backends[name]
            probe = info.check_available
            try:
                if probe is not None:
                    probe()
                rows.append((name, True, info.description))
            except BackendUnavailable as exc:
                rows.append((name, False, str(exc)))
            except PLUGIN_FAILURES as exc:  # noqa: BLE001 - a broken probe must not break the listing
                rows.append(
                    (
                        name,
                        False,
                        f"broken plugin '{info.plugin}': its availability check raised {describe(exc)}",
                    )
                )
        for plugin in sorted(self.broken):
            rows.append((plugin, False, broken_text(self._pm, plugin)))
        return rows


def collective_registry(pm: pluggy.PluginManager) -> dict[str, Any]:
    """The collective algorithms registered through ``astra_register_collectives``:
    name as system.json spells it (the core's bare, a plugin's ``plugin:<name>``) ->
    :class:`~astra_core.system.collectives.registry.Collective`. Raises AstraError
    when two plugins register the same name; a plugin whose hook raises contributes
    nothing and is noted in ``pm.broken``."""
    from astra_core.system.collectives.registry import Collective

    collectives: dict[str, Any] = {}

    def make_register(plugin_name: str, staged: dict[str, Any]):
        prefix = "" if plugin_name == BUILTIN_PLUGIN else "plugin:"

        def register(name, plan_builder=None, *, phase_builder=None, description=""):
            if (plan_builder is None) == (phase_builder is None):
                raise TypeError(
                    f"register({name!r}, ...): give exactly one of plan_builder and phase_builder"
                )
            _check_registration(name, plan_builder or phase_builder, "builder")
            key = prefix + name
            if key in collectives or key in staged:
                first = collectives[key].plugin if key in collectives else plugin_name
                raise _Duplicate(
                    f"collective algorithm '{name}' registered twice (by {first} and {plugin_name})"
                )
            staged[key] = Collective(plan_builder, phase_builder, str(description), plugin_name)

        return register

    def accept(plugin_name: str, name: str, collective: Any) -> None:
        collectives[name] = collective

    _call_register_hook(pm, "astra_register_collectives", accept, make_register)
    return collectives


# -- observers ---------------------------------------------------------------------------------


def notify_run_started(pm: pluggy.PluginManager, run: Any) -> None:
    """Warn about every broken plugin (one :class:`PluginWarning` line each: a
    run without an observer the user installed may lack an output they expect),
    then call every ``astra_run_started`` observer. Raises PluginError naming
    the first plugin whose hook raised (nothing has been simulated yet)."""
    for plugin, reason in _broken(pm).items():
        warnings.warn(f"plugin '{plugin}' is broken and was not used: {reason}", PluginWarning, stacklevel=2)
    for plugin, hook in hook_callers(pm, "astra_run_started"):
        try:
            hook(run=run)
        except PLUGIN_FAILURES as exc:
            raise PluginError(f"plugin '{plugin}': astra_run_started raised {describe(exc)}") from exc


def notify_run_finished(pm: pluggy.PluginManager, run: Any, report: Any) -> list[str]:
    """Call every ``astra_run_finished`` observer, each even if an earlier one raised.

    An observer's error never throws the finished result away: each is one
    :class:`PluginWarning` line naming the plugin. Returns those lines."""
    problems = []
    for plugin, hook in hook_callers(pm, "astra_run_finished"):
        try:
            hook(run=run, report=report)
        except PLUGIN_FAILURES as exc:  # noqa: BLE001 - report it, keep the result
            line = f"plugin '{plugin}': astra_run_finished raised {describe(exc)} (the run's result is kept)"
            problems.append(line)
            warnings.warn(line, PluginWarning, stacklevel=2)
    return problems


def progress_observers(pm: pluggy.PluginManager) -> Callable[[Any, Any], None] | None:
    """A callback ``report(run, sample)`` that calls every ``astra_run_progress``
    observer with them, or None when no plugin implements the hook.

    An observer that raises is dropped for the rest of the run, with one
    :class:`PluginWarning` line naming it; the run and the other observers go on."""
    callers = hook_callers(pm, "astra_run_progress")
    if not callers:
        return None

    def report(run: Any, sample: Any) -> None:
        for entry in list(callers):
            plugin, hook = entry
            try:
                hook(run=run, progress=sample)
            except PLUGIN_FAILURES as exc:  # noqa: BLE001 - drop it, keep the run
                callers.remove(entry)
                warnings.warn(
                    f"plugin '{plugin}': astra_run_progress raised {describe(exc)} (no more progress "
                    "reports to it in this run)",
                    PluginWarning,
                    stacklevel=2,
                )

    return report


def backend_registry(
    pm: pluggy.PluginManager | None = None, settings: PluginSettings | None = None
) -> BackendRegistry:
    """Registry over ``pm`` (a fresh default manager if None)."""
    settings = settings if settings is not None else load_settings()
    pm = pm or make_plugin_manager(settings=settings)
    return BackendRegistry(pm, settings.default_backend)
