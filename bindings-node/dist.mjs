// `make dist` (Node part): the addon cross-compiled for every platform the
// toolchain here allows (cargo-zigbuild and Zig from PyPI, through napi-rs's
// `--cross-compile`), laid out as napi-rs does: one npm package per platform
// in npm/<platform>/ (its package.json committed, its .node built here), the
// main package naming them in `optionalDependencies`; every package packed
// into dist/. Prints which targets built and which did not, and why.
//   node dist.mjs            (PATH must hold `cargo-zigbuild` and `python-zig`;
//                            DIST_PROFILE: the Cargo profile, default release)

import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const HERE = dirname(fileURLToPath(import.meta.url))
const OUT = join(HERE, '..', 'target', 'napi-dist')
/** The Cargo profile (`make dist DIST_PROFILE=…`): `release`, what is shipped, unless CI asks for its quicker check. */
const PROFILE = process.env.DIST_PROFILE || 'release'
export const DIST = join(HERE, 'dist')

/**
 * Target triple (a glibc version after the dot: the oldest the binary
 * needs, as manylinux2014's) -> napi-rs's platform name. Windows is not
 * here: its MSVC target needs cargo-xwin, which downloads Microsoft's CRT
 * from outside the package registries, and napi-rs refuses windows-gnu
 * with --cross-compile.
 */
/** The oldest macOS each binary runs on (Rust's own minimums; Zig would
 * otherwise stamp the newest it knows). */
const MACOS = { 'x86_64-apple-darwin': '10.12', 'aarch64-apple-darwin': '11.0' }

export const TARGETS = {
  'x86_64-unknown-linux-gnu.2.17': 'linux-x64-gnu',
  'aarch64-unknown-linux-gnu.2.17': 'linux-arm64-gnu',
  'x86_64-unknown-linux-musl': 'linux-x64-musl',
  'aarch64-unknown-linux-musl': 'linux-arm64-musl',
  'x86_64-apple-darwin': 'darwin-x64',
  'aarch64-apple-darwin': 'darwin-arm64',
}

const run = (cmd, args, opts = {}) => execFileSync(cmd, args, { cwd: HERE, encoding: 'utf8', ...opts })

/** The platform package's manifest, as napi-rs writes it. */
export function platformManifest(main, platform) {
  const [os, cpu, abi] = platform.split('-')
  const manifest = {
    name: `${main.name}-${platform}`,
    version: main.version,
    description: `The ${platform} binary of ${main.name} (see that package).`,
    main: `${main.napi.binaryName}.${platform}.node`,
    files: [`${main.napi.binaryName}.${platform}.node`],
    license: main.license,
    engines: main.engines,
    os: [os],
    cpu: [cpu],
  }
  if (abi !== undefined) manifest.libc = [abi === 'gnu' ? 'glibc' : abi]
  return manifest
}

function main() {
  const pkg = JSON.parse(readFileSync(join(HERE, 'package.json'), 'utf8'))
  rmSync(DIST, { recursive: true, force: true })
  mkdirSync(DIST, { recursive: true })
  mkdirSync(OUT, { recursive: true })
  const report = []
  for (const [triple, platform] of Object.entries(TARGETS)) {
    const rustTarget = triple.replace(/\.\d+\.\d+$/, '')
    try {
      run('rustup', ['target', 'add', rustTarget], { stdio: 'ignore' })
      const env = MACOS[triple] ? { ...process.env, MACOSX_DEPLOYMENT_TARGET: MACOS[triple] } : process.env
      run('npx', ['napi', 'build', '--platform', '--profile', PROFILE, '--target', triple, '-x', '--no-js', '--dts', '../target/cross.d.ts', '--output-dir', OUT], {
        stdio: ['ignore', 'ignore', 'pipe'],
        env,
      })
      const binary = `${pkg.napi.binaryName}.${platform}.node`
      const dir = join(HERE, 'npm', platform)
      mkdirSync(dir, { recursive: true })
      writeFileSync(join(dir, 'package.json'), `${JSON.stringify(platformManifest(pkg, platform), null, 2)}\n`)
      copyFileSync(join(OUT, binary), join(dir, binary))
      run('npm', ['pack', '--silent', '--pack-destination', DIST], { cwd: dir })
      report.push(`built  ${platform.padEnd(18)} ${triple}`)
    } catch (err) {
      report.push(`FAILED ${platform.padEnd(18)} ${triple}: ${String(err.stderr || err.message).trim().split('\n').slice(-3).join(' / ')}`)
    }
  }
  report.push('not built win32-x64-msvc       x86_64-pc-windows-msvc: cargo-xwin downloads the MSVC CRT from outside the registries')
  // The main package names the platform packages built, at its own version
  // (napi-rs's pre-publish step does the same: the repository's package.json
  // has none, so that `npm ci` needs no unpublished package).
  const manifest = readFileSync(join(HERE, 'package.json'), 'utf8')
  const built = report.filter((line) => line.startsWith('built')).map((line) => line.split(/\s+/)[1])
  const optionalDependencies = Object.fromEntries(built.map((platform) => [`${pkg.name}-${platform}`, pkg.version]))
  try {
    writeFileSync(join(HERE, 'package.json'), `${JSON.stringify({ ...pkg, optionalDependencies }, null, 2)}\n`)
    run('npm', ['pack', '--silent', '--pack-destination', DIST])
  } finally {
    writeFileSync(join(HERE, 'package.json'), manifest)
  }
  console.log(report.join('\n'))
  if (report.some((line) => line.startsWith('FAILED'))) process.exit(1)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main()
