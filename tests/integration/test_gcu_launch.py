"""A real launch on a (fake) 8-card Enflame GCU node.

The test builds a device tree with /dev/gcu0../dev/gcu7 and the driver's
/sys/module/enflame below a temporary --sysroot; gculaunch's default
`--device auto` must then pick the enflame-gcu profile, start one rank per
card and give each the profile's environment.  The ranks are shell scripts
that record their environment, so no accelerator and no Python are needed.
"""
import os
import unittest

import gltest

RANK_SCRIPT = """#!/bin/sh
env > "$1/env.$LOCAL_RANK"
"""


def fake_gcu_node(root, cards=8):
    os.makedirs(os.path.join(root, "dev"))
    for i in range(cards):
        open(os.path.join(root, "dev", "gcu%d" % i), "w").close()
    open(os.path.join(root, "dev", "gcuctl"), "w").close()  # the control node is no card
    os.makedirs(os.path.join(root, "sys", "module", "enflame"))


def read_env(path):
    env = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("=")
            env[key] = value
    return env


class GcuLaunch(unittest.TestCase):
    def launch(self, tmp, args, extra_env=None):
        root = os.path.join(tmp, "root")
        fake_gcu_node(root)
        out = os.path.join(tmp, "out")
        os.makedirs(out)
        script = os.path.join(tmp, "rank.sh")
        with open(script, "w") as f:
            f.write(RANK_SCRIPT)
        os.chmod(script, 0o755)
        with gltest.Job(["--sysroot", root, "--standalone"] + args +
                        ["--no-python", script, out], extra_env=extra_env) as job:
            code = job.wait(timeout=60)
        envs = {}
        for name in os.listdir(out):
            envs[int(name.split(".")[1])] = read_env(os.path.join(out, name))
        return code, job, envs

    def test_eight_cards_give_eight_ranks_with_the_gcu_environment(self):
        with gltest.TempDir() as tmp:
            code, job, envs = self.launch(tmp, ["--nproc-per-node", "8"])
            self.assertEqual(code, 0, job.stderr)
            self.assertEqual(sorted(envs), list(range(8)))
            for local_rank, env in envs.items():
                self.assertEqual(env["LOCAL_RANK"], str(local_rank))
                self.assertEqual(env["RANK"], str(local_rank))
                self.assertEqual(env["WORLD_SIZE"], "8")
                self.assertEqual(env["TOPS_VISIBLE_DEVICES"], "0,1,2,3,4,5,6,7")
                self.assertEqual(env["ENFLAME_VISIBLE_DEVICES"], "0,1,2,3,4,5,6,7")
                self.assertEqual(env["GCULAUNCH_DEVICE"], str(local_rank))
                self.assertEqual(env["GCULAUNCH_DEVICE_INDEX"], str(local_rank))
                self.assertEqual(env["GCULAUNCH_BACKEND"], "eccl")
                self.assertEqual(env["ECCL_MAX_NCHANNELS"], "2")
                self.assertEqual(env["ECCL_RUNTIME_3_0_ENABLE"], "true")
                self.assertEqual(env["TORCHELASTIC_USE_AGENT_STORE"], "True")

    def test_auto_counts_the_cards(self):
        with gltest.TempDir() as tmp:
            code, job, envs = self.launch(tmp, ["--nproc-per-node", "auto"])
            self.assertEqual(code, 0, job.stderr)
            self.assertEqual(sorted(envs), list(range(8)))

    def test_a_pool_from_the_platform_is_handed_out_one_card_per_rank(self):
        # The platform restricted this container to cards 4-7.
        with gltest.TempDir() as tmp:
            code, job, envs = self.launch(tmp, ["--nproc-per-node", "auto", "--bind", "rank"],
                                          extra_env={"TOPS_VISIBLE_DEVICES": "4,5,6,7"})
            self.assertEqual(code, 0, job.stderr)
            self.assertEqual(sorted(envs), [0, 1, 2, 3])
            for local_rank, env in envs.items():
                card = str(4 + local_rank)
                self.assertEqual(env["TOPS_VISIBLE_DEVICES"], card)
                self.assertEqual(env["ENFLAME_VISIBLE_DEVICES"], card)
                self.assertEqual(env["GCULAUNCH_DEVICE"], card)
                self.assertEqual(env["GCULAUNCH_DEVICE_INDEX"], "0")
                self.assertEqual(env["WORLD_SIZE"], "4")

    def test_more_ranks_than_cards_with_bind_rank_is_an_error(self):
        with gltest.TempDir() as tmp:
            code, job, envs = self.launch(tmp, ["--nproc-per-node", "9", "--bind", "rank"])
            self.assertEqual(code, 2, job.stderr)
            self.assertEqual(envs, {})
            self.assertEqual(len(job.stderr.strip().splitlines()), 1, job.stderr)
            self.assertIn("9", job.stderr)
            self.assertIn("--bind rank", job.stderr)


if __name__ == "__main__":
    unittest.main()
