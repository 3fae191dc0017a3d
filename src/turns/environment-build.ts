// A project's environment built ahead of its jobs (issue 30, "Prebuilt"): the setup runs at the
// project's base ref in a checkout of the build's own, made from the project's mirror like a
// job's clone and deleted afterwards, and what it made is kept as this worker's snapshot. The
// first job after a change of the project, its settings or its base ref then starts warm.
import type { Config } from '../config.ts';
import type { ProjectRow } from '../db/schema.ts';
import type { Environments } from '../environments/environments.ts';
import type { Forges } from '../forges/clients.ts';
import type { Logger } from '../log.ts';
import type { TurnSecret } from '../projects/secrets.ts';
import { projectCommandLimits } from '../projects/service.ts';
import { scrubDeep, secretScrubber } from '../secrets/scrub.ts';
import { prepareCheckout, removeCheckout, withJobLock } from '../workspace/index.ts';
import { repositoryForge } from './forge.ts';
import { workspaceConfig } from './pipeline.ts';
import { secretScrubForms } from './secrets.ts';

export interface EnvironmentBuilderDeps {
  config: Config;
  log: Logger;
  forges: Forges;
  environments: Environments;
}

/** The build checkout's name among the job clones: no job id has this form (ids.ts). */
const buildId = (projectId: string) => `environment-build-${projectId}`;

export class EnvironmentBuilder {
  readonly #deps: EnvironmentBuilderDeps;

  constructor(deps: EnvironmentBuilderDeps) {
    this.#deps = deps;
  }

  /**
   * Builds the project's environment at its base ref unless this worker has it; says which.
   * Its steps go to the log (there is no job to tell), scrubbed of the project's secrets.
   */
  async build(
    project: ProjectRow,
    secrets: readonly TurnSecret[],
    signal: AbortSignal,
  ): Promise<'present' | 'built' | 'not kept'> {
    const { config, forges, environments } = this.#deps;
    const workspace = workspaceConfig(config);
    const scrub = [...config.secrets, ...secretScrubForms(secrets)];
    const forge = await repositoryForge(forges, project, project.repository, signal, scrub);
    const log = this.#deps.log.child({ projectId: project.id });
    const emit = async (type: string, data: Record<string, unknown> = {}) => {
      log.info({ event: type, data: scrubDeep(data, secretScrubber(scrub)) }, 'environment build');
    };
    const jobId = buildId(project.id);
    try {
      return await withJobLock(
        workspace,
        jobId,
        async (lease) => {
          const checkout = await prepareCheckout(workspace, {
            projectId: project.id,
            jobId,
            repository: project.repository,
            ref: project.ref,
            // No such branch on the remote: the checkout is the base ref's commit.
            branch: `errand/${jobId}`,
            ...(forge.auth ? { auth: forge.auth } : {}),
            signal,
            lease,
          });
          return environments.prebuild({
            project,
            secrets,
            dir: checkout.dir,
            baseCommit: checkout.baseCommit,
            limits: projectCommandLimits(project),
            emit,
            signal,
          });
        },
        signal,
      );
    } finally {
      await removeCheckout(workspace, { jobId });
    }
  }
}
