// `errand engine install|list`: the coding CLIs a project may run as its agent, installed from
// npm into this machine's engines directory (src/engines/catalog.ts). Local commands, like
// `migrate`: they need no API, and they run on each worker that is to run an engine, or once
// into a directory the workers share (a deploy's init step: `errand engine install` installs
// what ERRAND_ENGINES names).
import { type Config, ConfigError, loadConfig } from '../config.ts';
import {
  type EngineStatus,
  INSTALLABLE_ENGINES,
  type InstallableEngine,
  type InstalledEngine,
  installEngine,
  listEngines,
} from '../engines/catalog.ts';
import { COMMON_OPTIONS, defineCommand, type Family, type Io, print } from './command.ts';
import { EXIT, UsageError } from './errors.ts';

function engineConfig(io: Io, dataDir: string | undefined) {
  return loadConfig(io.env, dataDir === undefined ? {} : { dataDir });
}

const install = defineCommand({
  name: 'engine install',
  args: ['[NAME]'],
  options: COMMON_OPTIONS,
  summary: `installs an engine's pinned version from npm (${INSTALLABLE_ENGINES.join(', ')}), or without NAME each one ERRAND_ENGINES names; nothing for one installed`,
  async run({ values, args: [name], io }) {
    const config = engineConfig(io, values['data-dir']);
    const names = name === undefined ? configuredEngines(config) : [installableName(name)];
    const log = values.json ? () => {} : (line: string) => io.stdout.write(`  ${line}\n`);
    const installed: InstalledEngine[] = [];
    // One after the other: each runs npm, and the machine is often a small init container.
    for (const engine of names) installed.push(await installEngine(config, engine, { log }));
    const text = installed.map((e) => `${e.name} ${e.version}: ${e.bin}`).join('\n');
    // A named engine is one record (as before ERRAND_ENGINES); the setting's are a list.
    print(io, values.json, name === undefined ? installed : installed[0], text);
    return EXIT.ok;
  },
});

/** The engines ERRAND_ENGINES names, each once, in its order; an error when it names none. */
function configuredEngines(config: Pick<Config, 'engines'>): InstallableEngine[] {
  if (config.engines.length === 0)
    throw new UsageError(
      `no engine to install: name one (${INSTALLABLE_ENGINES.join(', ')}) or set ERRAND_ENGINES to a comma-separated list of them`,
    );
  const names: InstallableEngine[] = [];
  for (const name of config.engines) {
    const found = INSTALLABLE_ENGINES.find((e) => e === name);
    if (found === undefined)
      throw new ConfigError(
        `invalid setting ERRAND_ENGINES: ${JSON.stringify(name)} is not an engine to install; the engines are ${INSTALLABLE_ENGINES.join(', ')}${name === 'errand' ? ' (errand is the built-in one: nothing to install)' : ''}`,
      );
    if (!names.includes(found)) names.push(found);
  }
  return names;
}

const list = defineCommand({
  name: 'engine list',
  options: COMMON_OPTIONS,
  summary: 'every engine, its pinned version, and whether it is installed here (and where)',
  async run({ values, io }) {
    const engines = await listEngines(engineConfig(io, values['data-dir']));
    const line = (e: EngineStatus) =>
      `${e.name.padEnd(12)} ${e.version.padEnd(10)} ${e.installed ? `installed  ${e.dir}` : `not installed (errand engine install ${e.name})`}`;
    print(io, values.json, engines, engines.map(line).join('\n'));
    return EXIT.ok;
  },
});

function installableName(name: string): InstallableEngine {
  const found = INSTALLABLE_ENGINES.find((e) => e === name);
  if (found === undefined)
    throw new UsageError(
      name === 'errand'
        ? 'errand is the built-in engine: there is nothing to install'
        : `unknown engine ${JSON.stringify(name)}: one of ${INSTALLABLE_ENGINES.join(', ')}`,
    );
  return found;
}

export const engines: Family = {
  name: 'engine',
  commands: [install, list],
  subcommandPages: false,
  overview:
    'the coding CLIs a project may run as its agent, from npm into ERRAND_ENGINES_DIR; both take --json',
  outro: `
Engines are the coding CLIs a project may run instead of Errand's own agent (its "engine"
setting). Each is installed from the npm registry, at the version Errand is tested with, into
ERRAND_ENGINES_DIR (default: <data-dir>/engines), on every machine that runs workers, or once
into a directory they all mount. Without NAME, install takes the engines from ERRAND_ENGINES
(e.g. claude-code,codex). An install is atomic: several at once on one directory are safe.
`,
};
