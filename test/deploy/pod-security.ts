// The Pod Security Standards' checks (kubernetes.io/docs/concepts/security/pod-security-standards),
// at policy version v1.35, for the fields Errand's pods set or could set: what the Pod Security
// admission controller would refuse of a pod template, at `baseline` and at `restricted`.
// From v1.35 on, baseline allows any procMount in a pod with its own user namespace
// (hostUsers: false); restricted still allows only Default.
import type { IPodSpec } from 'kubernetes-models/v1/PodSpec';

type Level = 'baseline' | 'restricted';

const BASELINE_CAPABILITIES = new Set([
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
]);
const SELINUX_TYPES = new Set([
  '',
  'container_t',
  'container_init_t',
  'container_kvm_t',
  'container_engine_t',
]);
const SAFE_SYSCTLS = new Set([
  'kernel.shm_rmid_forced',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.ping_group_range',
  'net.ipv4.ip_local_reserved_ports',
  'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_fin_timeout',
  'net.ipv4.tcp_keepalive_intvl',
  'net.ipv4.tcp_keepalive_probes',
]);
const RESTRICTED_VOLUMES = [
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'persistentVolumeClaim',
  'projected',
  'secret',
];

/** What the level refuses of the pod, one line per check that fails; empty when admitted. */
export function violations(
  spec: IPodSpec,
  annotations: Record<string, string>,
  level: Level,
): string[] {
  const out = baseline(spec, annotations);
  if (level === 'restricted') out.push(...restricted(spec));
  return out;
}

function containersOf(spec: IPodSpec) {
  return [...(spec.initContainers ?? []), ...spec.containers];
}

function baseline(spec: IPodSpec, annotations: Record<string, string>): string[] {
  const out: string[] = [];
  const pod = spec.securityContext ?? {};
  if (spec.hostNetwork || spec.hostPID || spec.hostIPC) out.push('host namespaces');
  if (pod.windowsOptions?.hostProcess) out.push('hostProcess');
  if ((spec.volumes ?? []).some((v) => v.hostPath)) out.push('hostPath volumes');
  if (pod.seccompProfile?.type === 'Unconfined') out.push('seccomp Unconfined (pod)');
  if (pod.appArmorProfile?.type === 'Unconfined') out.push('AppArmor Unconfined (pod)');
  if (
    !SELINUX_TYPES.has(pod.seLinuxOptions?.type ?? '') ||
    pod.seLinuxOptions?.user ||
    pod.seLinuxOptions?.role
  )
    out.push('SELinux options (pod)');
  for (const s of pod.sysctls ?? []) if (!SAFE_SYSCTLS.has(s.name)) out.push(`sysctl ${s.name}`);
  for (const [key, value] of Object.entries(annotations))
    if (key.startsWith('container.apparmor.security.beta.kubernetes.io/') && value === 'unconfined')
      out.push(`AppArmor unconfined (${key})`);
  for (const c of containersOf(spec)) {
    const sc = c.securityContext ?? {};
    if (sc.privileged) out.push(`${c.name}: privileged`);
    if (sc.windowsOptions?.hostProcess) out.push(`${c.name}: hostProcess`);
    for (const cap of sc.capabilities?.add ?? [])
      if (!BASELINE_CAPABILITIES.has(cap)) out.push(`${c.name}: capability ${cap}`);
    if ((c.ports ?? []).some((p) => p.hostPort)) out.push(`${c.name}: hostPort`);
    if (sc.appArmorProfile?.type === 'Unconfined') out.push(`${c.name}: AppArmor Unconfined`);
    if (
      !SELINUX_TYPES.has(sc.seLinuxOptions?.type ?? '') ||
      sc.seLinuxOptions?.user ||
      sc.seLinuxOptions?.role
    )
      out.push(`${c.name}: SELinux options`);
    if (sc.seccompProfile?.type === 'Unconfined') out.push(`${c.name}: seccomp Unconfined`);
    if (sc.procMount && sc.procMount !== 'Default' && spec.hostUsers !== false)
      out.push(`${c.name}: procMount ${sc.procMount} without a user namespace`);
  }
  return out;
}

function restricted(spec: IPodSpec): string[] {
  const out: string[] = [];
  const pod = spec.securityContext ?? {};
  // Root in a pod's own user namespace is no one on the node: these two are waived there.
  const userns = spec.hostUsers === false;
  for (const v of spec.volumes ?? []) {
    const kinds = Object.keys(v).filter((k) => k !== 'name');
    if (!kinds.every((k) => RESTRICTED_VOLUMES.includes(k)))
      out.push(`volume ${v.name}: ${kinds.join()}`);
  }
  if (!userns && pod.runAsUser === 0) out.push('runAsUser 0 (pod)');
  for (const c of containersOf(spec)) {
    const sc = c.securityContext ?? {};
    if (sc.allowPrivilegeEscalation !== false)
      out.push(`${c.name}: allowPrivilegeEscalation not false`);
    if (!userns) {
      const nonRoot = sc.runAsNonRoot ?? pod.runAsNonRoot;
      if (nonRoot !== true) out.push(`${c.name}: runAsNonRoot not true`);
      if (sc.runAsUser === 0) out.push(`${c.name}: runAsUser 0`);
    }
    const seccomp = sc.seccompProfile?.type ?? pod.seccompProfile?.type;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost')
      out.push(`${c.name}: seccomp ${seccomp ?? 'unset'}`);
    if (!(sc.capabilities?.drop ?? []).includes('ALL'))
      out.push(`${c.name}: capabilities not dropped`);
    for (const cap of sc.capabilities?.add ?? [])
      if (cap !== 'NET_BIND_SERVICE') out.push(`${c.name}: capability ${cap} added`);
    if (sc.procMount && sc.procMount !== 'Default')
      out.push(`${c.name}: procMount ${sc.procMount}`);
  }
  return out;
}
