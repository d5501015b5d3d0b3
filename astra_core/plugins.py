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
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pluggy

from astra_core import hookspecs
from astra_core.errors import AstraError, BackendUnavailable, ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENTRY_POINT_GROUP = "astra"
BUILTIN_DEFAULT_BACKEND = "analytical"


@dataclass
class BackendInfo:
    """A registered network backend."""

    name: str
    factory: Callable[..., Any]
    config_type: Any = None  # a class, or "module:Class" imported on demand
    description: str = ""
    plugin: str = "?"

    def config_class(self) -> Any:
        """The backend's config class (importing it if it was named as a string)."""
        if isinstance(self.config_type, str):
            module, _, attr = self.config_type.partition(":")
            return getattr(importlib.import_module(module), attr)
        return self.config_type


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
            raise ConfigError(f"{path}: unknown key '{sorted(unknown)[0]}' (known: "
                              "default_backend, disabled, modules)")
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


def make_plugin_manager(*, autoload: bool = True, disabled: list[str] | None = None,
                        modules: list[str] | None = None,
                        settings: PluginSettings | None = None) -> pluggy.PluginManager:
    """A fresh plugin manager (no global state): entry points, then extra modules."""
    settings = settings if settings is not None else load_settings()
    pm = pluggy.PluginManager("astra")
    pm.add_hookspecs(hookspecs)
    blocked = set(settings.disabled) | set(disabled or [])
    for name in blocked:
        pm.set_blocked(name)
    if autoload:
        pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    for module_name in [*settings.modules, *(modules or [])]:
        if module_name in blocked or pm.has_plugin(module_name):
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ConfigError(f"plugin module '{module_name}' cannot be imported: {exc}") from None
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


class BackendRegistry:
    """Backends contributed by the plugins of one plugin manager."""

    def __init__(self, pm: pluggy.PluginManager, default: str = BUILTIN_DEFAULT_BACKEND):
        self.default = default
        self.backends: dict[str, BackendInfo] = {}
        for impl in pm.hook.astra_register_backends.get_hookimpls():
            plugin_name = pm.get_name(impl.plugin) or "?"

            def register(name, factory, *, config_type=None, description="", _plugin=plugin_name):
                if name in self.backends:
                    raise AstraError(f"backend '{name}' registered twice (by "
                                     f"{self.backends[name].plugin} and {_plugin})")
                self.backends[name] = BackendInfo(name, factory, config_type, description, _plugin)

            impl.function(register=register)

    def names(self) -> list[str]:
        return sorted(self.backends)

    def get(self, name: str | None) -> BackendInfo:
        """The backend called ``name`` (default if None). Raises AstraError."""
        name = name or self.default
        info = self.backends.get(name)
        if info is None:
            available = ", ".join(self.names()) or "none (is astra-analytical installed?)"
            raise AstraError(f"unknown backend '{name}'; available: {available}")
        return info

    def create(self, name: str | None, topology, config=None):
        """Build a backend instance; BackendUnavailable propagates with its install hint."""
        return self.get(name).factory(topology, config)

    def availability(self) -> list[tuple[str, bool, str]]:
        """(name, usable, description-or-reason) per backend, without running anything."""
        rows = []
        for name in self.names():
            info = self.backends[name]
            probe = getattr(info.factory, "check_available", None)
            try:
                if probe is not None:
                    probe()
                rows.append((name, True, info.description))
            except BackendUnavailable as exc:
                rows.append((name, False, str(exc)))
        return rows


def collective_registry(pm: pluggy.PluginManager) -> dict[str, Callable[..., Any]]:
    """Collective plan builders contributed by the plugins, by name. Raises AstraError
    when two plugins register the same name."""
    builders: dict[str, Callable[..., Any]] = {}
    owners: dict[str, str] = {}
    for impl in pm.hook.astra_register_collectives.get_hookimpls():
        plugin_name = pm.get_name(impl.plugin) or "?"

        def register(name, plan_builder, *, description="", _plugin=plugin_name):
            if name in builders:
                raise AstraError(f"collective algorithm '{name}' registered twice (by "
                                 f"{owners[name]} and {_plugin})")
            builders[name] = plan_builder
            owners[name] = _plugin

        impl.function(register=register)
    return builders


def backend_registry(pm: pluggy.PluginManager | None = None,
                     settings: PluginSettings | None = None) -> BackendRegistry:
    """Registry over ``pm`` (a fresh default manager if None)."""
    settings = settings if settings is not None else load_settings()
    pm = pm or make_plugin_manager(settings=settings)
    return BackendRegistry(pm, settings.default_backend)
