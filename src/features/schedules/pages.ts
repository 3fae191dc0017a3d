// The dashboard's schedules page as a function of its data: a project's schedules, each with its
// last firing and its job (or why none was made), the buttons to pause, resume and delete one,
// and the form to add one. Every value goes through `html`.
import { html, type SafeHtml } from '../../dashboard/html.ts';
import { notice, page, when } from '../../dashboard/layout.ts';
import type { Principal } from '../../keys/service.ts';
import type { ProjectRecord } from '../../records/project.ts';
import { SCHEDULE_MODES, type ScheduleRecord } from './types.ts';

/** What the create form shows: typed values again after a refusal. */
export interface ScheduleForm {
  name: string;
  cron: string;
  timezone: string;
  prompt: string;
  mode: string;
  model: string;
}

export const emptyScheduleForm: ScheduleForm = {
  name: '',
  cron: '',
  timezone: 'UTC',
  prompt: '',
  mode: 'code',
  model: '',
};

function lastFiring(projectId: string, schedule: ScheduleRecord): SafeHtml {
  const last = schedule.lastFiring;
  if (!last) return html`<span class="muted">not fired yet</span>`;
  const made = last.jobId
    ? html`<a class="mono" href="/projects/${projectId}/jobs/${last.jobId}">${last.jobId}</a>`
    : html`<span class="badge failed">no job</span> ${last.error ?? ''}`;
  return html`${when(last.at)}<div>${made}</div>`;
}

function row(base: string, projectId: string, schedule: ScheduleRecord): SafeHtml {
  return html`<tr>
  <td class="wrap">${schedule.name}<div class="muted mono">${schedule.id}</div></td>
  <td data-label="When"><code>${schedule.cron}</code> <span class="muted">${schedule.timezone}</span></td>
  <td data-label="Mode">${schedule.mode}</td>
  <td data-label="Status"><span class="badge ${schedule.paused ? 'disabled' : 'enabled'}">${
    schedule.paused ? 'paused' : 'active'
  }</span></td>
  <td class="wrap" data-label="Last firing">${lastFiring(projectId, schedule)}</td>
  <td class="actions">
    <form method="post" action="${base}/${schedule.id}/paused" class="inline">
      <input type="hidden" name="paused" value="${schedule.paused ? 'false' : 'true'}">
      <button type="submit" class="link">${schedule.paused ? 'Resume' : 'Pause'}</button>
    </form>
    <form method="post" action="${base}/${schedule.id}/delete" class="inline">
      <button type="submit" class="link">Delete</button>
    </form></td>
</tr>`;
}

function fields(values: ScheduleForm): SafeHtml {
  return html`
  <label for="name">Name</label>
  <input id="name" name="name" maxlength="100" value="${values.name}" placeholder="weekly dependencies">
  <label for="cron">Cron expression</label>
  <input id="cron" name="cron" required maxlength="200" value="${values.cron}" placeholder="0 6 * * 1"
    aria-describedby="cron-help" autocomplete="off">
  <p id="cron-help" class="help">Five fields, minutes first: <code>0 6 * * 1</code> is Mondays at 06:00.
  At most one firing a minute.</p>
  <label for="timezone">Time zone</label>
  <input id="timezone" name="timezone" maxlength="64" value="${values.timezone}" placeholder="Europe/Paris">
  <label for="prompt">Prompt</label>
  <textarea id="prompt" name="prompt" required rows="4">${values.prompt}</textarea>
  <label for="mode">Mode</label>
  <select id="mode" name="mode">
    ${SCHEDULE_MODES.map((mode) => html`<option value="${mode}" ${values.mode === mode ? html`selected` : ''}>${mode}</option>`)}
  </select>
  <label for="model">Model</label>
  <input id="model" name="model" maxlength="200" value="${values.model}" placeholder="the project's">`;
}

export function schedulesPage(
  principal: Principal,
  project: ProjectRecord,
  schedules: ScheduleRecord[],
  opts: { values: ScheduleForm; error?: string | undefined; notice?: string | undefined },
): string {
  const base = `/projects/${project.id}/schedules`;
  const table = schedules.length
    ? html`<div class="scroll"><table class="list">
<thead><tr><th scope="col">Name</th><th scope="col">When</th><th scope="col">Mode</th>
<th scope="col">Status</th><th scope="col">Last firing</th><th scope="col"><span class="sr">Actions</span></th></tr></thead>
<tbody>${schedules.map((schedule) => row(base, project.id, schedule))}</tbody></table></div>`
    : html`<p>No schedules yet.</p>`;
  return page(
    { title: `Schedules of ${project.name}`, principal },
    html`<p><a href="/projects/${project.id}/settings">← Settings of ${project.name}</a></p>
${notice(opts.notice, 'ok')}
<p>At each firing, a job is created with the schedule's prompt, counted in the project's rate
limit and budget; a firing refused is shown with its reason.</p>
${table}
<section aria-labelledby="new-schedule"><h2 id="new-schedule">Add a schedule</h2>
${notice(opts.error)}
<form method="post" action="${base}" class="card">
${fields(opts.values)}
<button type="submit">Create schedule</button>
</form></section>`,
  );
}
