// The layers of src/ (DESIGN.md, "Layout"), checked by `npm run lint`: a module imports only
// the modules listed after it, so imports run downward and no two folders import each other.
// Within a row the order is DESIGN's (e.g. the API may use the dashboard, not the reverse).
// Tests (*.test.ts, test/, bench/) may import any of src/; src/ never imports them.
// A feature (src/features/<name>/) is one folder across layers: its routes, worker, storage and
// pages. It may use every layer below it, and of another feature only its index.ts.
// dependency-cruiser parses TypeScript with swc: TypeScript 7's compiler has no JavaScript API.

/** Top to bottom. A name is a folder of src/ (`cli`), a file (`main.ts`) or one inside a folder. */
const LAYERS = [
  ['main.ts'], // the entry: dispatches `errand <command>`
  ['cli'], // every command; `serve` and `worker` start service.ts
  ['service.ts'], // builds the context and starts what a process runs
  // Features sit above the API and the dashboard, whose helpers they use: service.ts wires their
  // routes and pages in (http/app.ts's ApiRoutes, dashboard/plugin.ts's DashboardPages), so no
  // layer below imports a feature.
  ['features'],
  ['http', 'dashboard', 'mcp'],
  // AppContext, which service.ts builds for the rows above; the rows below declare the part they
  // use (JobsContext, ProjectsContext, WorkerContext) and so never import it.
  ['context.ts'],
  ['queue', 'turns'],
  ['environments'], // a project's environment snapshots: restored or built for turns and builds
  ['agent', 'engines', 'sandbox', 'workspace', 'forges'],
  ['metrics'],
  ['jobs', 'projects', 'users', 'keys'], // users: people signed in through the OpenID provider
  // Each event type declared once (its data's schema and words), for the job log's writers.
  ['events'],
  // The audit log's one writer (every layer above writes its changes' rows through it).
  ['idempotency', 'ratelimit', 'audit'],
  // The API's records, each declared once as a schema (types, OpenAPI components, client types).
  ['records'],
  // Shared pieces that import nothing above the database; config.ts's type is read everywhere.
  [
    'net', // the address rules for URLs a user gives (webhooks, MCP servers)
    'config.ts',
    'validation.ts',
    'responses.ts',
    'errors.ts',
    'ids.ts',
    'json.ts',
    'retry-after.ts',
    'version.ts',
    'text.ts',
    'words.ts',
    'secrets',
    'repository',
  ],
  ['db'],
  ['log.ts', 'lock.ts'],
  // The typed client imports nothing of the server; only the CLI and the MCP server use it (the
  // rule 'client: used by its users only' below).
  ['client'],
];

/** The path pattern of a layer's name. */
const pattern = (name) =>
  name.endsWith('.ts') ? `^src/${name.replaceAll('.', '\\.')}$` : `^src/${name}/`;
const ORDER = LAYERS.flat();
const TESTS = '\\.test\\.ts$';

// One rule per name: nothing of it imports a name listed before it.
const layerRules = ORDER.slice(1).map((name, i) => ({
  name: `layers: ${name}`,
  severity: 'error',
  comment: `${name} may import only what .dependency-cruiser.cjs lists after it: ${ORDER.slice(i + 2).join(', ')}`,
  from: { path: pattern(name), pathNot: TESTS },
  to: { path: ORDER.slice(0, i + 1).map(pattern) },
}));

/** Any module of src/ outside every layer. */
const UNPLACED = `^src/(?!(${ORDER.map((name) => pattern(name).slice('^src/'.length)).join('|')}))`;

module.exports = {
  forbidden: [
    ...layerRules,
    {
      name: 'layers: unplaced',
      severity: 'error',
      comment:
        'every folder and top-level file of src/ has a place in LAYERS (.dependency-cruiser.cjs)',
      from: {},
      to: { path: UNPLACED, pathNot: TESTS },
    },
    {
      name: 'layers: unplaced',
      severity: 'error',
      comment:
        'every folder and top-level file of src/ has a place in LAYERS (.dependency-cruiser.cjs)',
      from: { path: UNPLACED, pathNot: TESTS },
      to: {},
    },
    {
      name: 'features: another feature through its index.ts',
      severity: 'error',
      comment:
        "a feature uses another feature only through that feature's index.ts, its public face (src/features/<name>/index.ts)",
      from: { path: '^src/features/([^/]+)/', pathNot: TESTS },
      to: {
        path: '^src/features/',
        pathNot: ['^src/features/$1/', '^src/features/[^/]+/index\\.ts$'],
      },
    },
    {
      name: 'features: the rest through index.ts',
      severity: 'error',
      comment:
        'code outside the features uses a feature only through its index.ts (src/features/<name>/index.ts); tests may reach inside',
      from: { path: '^src/', pathNot: ['^src/features/', TESTS] },
      to: { path: '^src/features/', pathNot: '^src/features/[^/]+/index\\.ts$' },
    },
    {
      name: 'client: used by its users only',
      severity: 'error',
      comment:
        "the server's records are src/records/'s: only the CLI and the MCP server, which talk to the service through the typed client, import src/client/",
      from: { path: '^src/', pathNot: ['^src/client/', '^src/cli/', '^src/mcp/', TESTS] },
      to: { path: '^src/client/' },
    },
    {
      name: 'src not to tests',
      severity: 'error',
      comment: 'src/ never imports test/ or bench/ (a test file beside its module may)',
      from: { path: '^src/', pathNot: TESTS },
      to: { path: ['^test/', '^bench/', TESTS] },
    },
    {
      name: 'no cycles',
      severity: 'error',
      comment:
        'modules that import each other, type-only imports too: a type two modules share lives in a third that both import',
      from: {},
      to: { circular: true },
    },
    {
      name: 'unresolvable',
      severity: 'error',
      comment: 'an import that resolves to no file or package',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    parser: 'swc',
    moduleSystems: ['es6'],
    doNotFollow: { path: 'node_modules' },
    exclude: { path: ['^node_modules/', '^dist/'] },
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.json'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
