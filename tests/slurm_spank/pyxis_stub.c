/*
 * A stand-in for NVIDIA's pyxis SPANK plugin (https://github.com/NVIDIA/pyxis/wiki/Usage), for the local Slurm
 * cluster's tests only. Like pyxis it adds its options to srun (local context), sbatch and salloc (allocator
 * context) and slurmstepd (remote context) wherever plugstack.conf loads it: the ones the console's Slurm scripts
 * use, --container-image and --container-mounts (apps/backends/render/workload/containers.py). Without it srun
 * refuses them ("unrecognized option"). It runs no container and imports no image: in each task it puts the
 * values srun passed on into the environment (PYXIS_STUB_IMAGE, PYXIS_STUB_MOUNTS), which a test reads back.
 *
 * Built by tests/backends/slurm/test_pyxis.py: gcc -shared -fPIC against spank.h (Debian's libslurm-dev, which
 * scripts/slurm-local.sh installs). spank(8) and slurm/spank.h describe the interface used here.
 */
#include <stdlib.h>
#include <string.h>

#include <slurm/spank.h>

SPANK_PLUGIN(pyxis_stub, 1);

enum { IMAGE, MOUNTS, OPTIONS };
static char *given[OPTIONS];

static int keep(int which, const char *value, int remote)
{
	(void)remote;
	if (value == NULL || *value == '\0')
		return -1; /* an empty image or mount list is refused */
	free(given[which]);
	given[which] = strdup(value);
	return given[which] ? 0 : -1;
}

static struct spank_option options[OPTIONS] = {
	{"container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH", "[pyxis stub] the image the task runs in", 1,
	 IMAGE, keep},
	{"container-mounts", "SRC:DST[:FLAGS][,SRC:DST...]", "[pyxis stub] bind mounts into the container", 1,
	 MOUNTS, keep},
};

/* Registered where pyxis registers them (its slurm_spank_init: srun, sbatch/salloc, slurmstepd). */
int slurm_spank_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	switch (spank_context()) {
	case S_CTX_LOCAL:
	case S_CTX_ALLOCATOR:
	case S_CTX_REMOTE:
		for (int i = 0; i < OPTIONS; i++)
			if (spank_option_register(sp, &options[i]) != ESPANK_SUCCESS)
				return -1;
		return 0;
	default:
		return 0;
	}
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (given[IMAGE] && spank_setenv(sp, "PYXIS_STUB_IMAGE", given[IMAGE], 1) != ESPANK_SUCCESS)
		return -1;
	if (given[MOUNTS] && spank_setenv(sp, "PYXIS_STUB_MOUNTS", given[MOUNTS], 1) != ESPANK_SUCCESS)
		return -1;
	return 0;
}
