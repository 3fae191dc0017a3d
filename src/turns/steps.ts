// What the turn pipeline (pipeline.ts) lends the best-of-N attempts (attempts.ts): the steps
// of a normal turn, each run on the attempt's own checkout with the attempt's agent, and the
// types they share. Said here so that the two files import it, not each other.

import type { ModelRegistry } from '../agent/models.ts';
import type { SetupNote } from '../agent/prompt.ts';
import type { Config } from '../config.ts';
import type { Environments } from '../environments/environments.ts';
import type { Emit } from '../events/catalog.ts';
import type { TurnInput, TurnOutput } from '../jobs/runner.ts';
import type { TokenUsage } from '../jobs/usage.ts';
import type { Logger } from '../log.ts';
import type { SandboxLimits } from '../projects/limits.ts';
import type { Checkout, WorkspaceConfig } from '../workspace/index.ts';
import type { TurnForge } from './forge.ts';

/** What the agent (Errand's own or an engine) did in a turn, and the value it was asked for. */
export type AgentOutcome = {
  summary: string;
  usage: TokenUsage;
  turnMessages: unknown[];
  output?: { value: unknown } | undefined;
};

/** The run_command tool's settings for a turn where it is offered. */
export interface TurnCommands {
  limits: SandboxLimits;
  setup: SetupNote | undefined;
}

/** Where an agent runs: a checkout, the workspace id its engine state is kept under. */
export interface AgentPlace {
  dir: string;
  /** The job's id, or an attempt's workspace id (workspace/layout.ts). */
  workspaceId: string;
  /**
   * Among how many attempts the job's budget left is shared: the agent may spend this share
   * of it (the month's budget stays whole); absent: all of it.
   */
  budgetShare?: number | undefined;
}

/** The steps of a turn the pipeline lends the attempts; `input` is the attempt's. */
export interface TurnSteps {
  config: Config;
  workspace: WorkspaceConfig;
  models: ModelRegistry;
  environments: Environments;
  log: Logger;
  /** The project's environment and run_command's settings, where commands are on. */
  commands(input: TurnInput, checkout: Checkout, emit: Emit): Promise<TurnCommands | undefined>;
  /** The agent of `input.project.engine` on `input.job.model`. */
  agent(
    input: TurnInput,
    place: AgentPlace,
    emit: Emit,
    commands: TurnCommands | undefined,
  ): Promise<AgentOutcome>;
  /** Pushes `sha` to the job's branch and opens or updates its pull request. */
  publish(
    input: TurnInput,
    checkout: Checkout,
    forge: TurnForge,
    sha: string,
    summary: string,
    emit: Emit,
  ): Promise<Pick<TurnOutput, 'commitSha' | 'prLink' | 'prNumber'>>;
}
