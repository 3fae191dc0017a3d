// `errand engine install|list`: the coding CLIs a project may run as its agent, installed from
// npm into this machine's engines directory (src/engines/catalog.ts). Local commands, like
// `migrate`: they need no API, and they run on each worker that is to run an engine.
import { loadConfig } from '../config.ts';
import {
  type EngineStatus,
  INSTALLABLE_ENGINES,
  type InstallableEngine,
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
  args: ['NAME'],
  options: COMMON_OPTIONS,
  summary: `installs an engine's pinned version from npm (${INSTALLABLE_ENGINES.join(', ')}); nothing if it is installed`,
  async run({ values, args: [name = ''], io }) {
    const engine = installableName(name);
    const config = engineConfig(io, values['data-dir']);
    const log = values.json ? () => {} : (line: string) => io.stdout.write(`  ${line}\n`);
    const installed = await installEngine(config, engine, { log });
    print(io, values.json, installed, `${installed.name} ${installed.version}: ${installed.bin}`);
    return EXIT.ok;
  },
});

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
ERRAND_ENGINES_DIR (default: <data-dir>/engines), on every machine that runs workers.
`,
};
