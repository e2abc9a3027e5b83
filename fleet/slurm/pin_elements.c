/*
 * pin_elements: set the requested node of held job-array elements, one update RPC each.
 *
 * stdin: one "ARRAY_TASK NODE" pair per line (e.g. "4711_3 gpu017").
 * stdout: one line per pair, "ok ARRAY_TASK" or "error ARRAY_TASK <Slurm's words>".
 * Exit 0 when every update was accepted, 1 otherwise.
 *
 * Each update is the REQUEST_UPDATE_JOB that `scontrol update JobId=A_i NodeList=NODE` sends
 * (job_id_str and req_nodes set on an otherwise initialised job_desc_msg_t). What scontrol does
 * before it is left out: for a NodeList it first loads every job record of the array
 * (REQUEST_JOB_INFO_SINGLE) to check that the id names one job, which slurmctld pays for on
 * every element (benchmarks/fleet/results/fleet_pin.md has the numbers). Here the id is always
 * one element, made by the submit itself.
 *
 * Built by validators/fleet/slurm/pin.py with the host's C compiler against the host's
 * <slurm/slurm.h> (Debian/Ubuntu: libslurm-dev; RHEL: slurm-devel), so the structures are the
 * installed Slurm's own; nothing of this file is version-specific beyond the public API.
 */
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <stdio.h>
#include <string.h>

#define LINE_MAX_BYTES 8192

int main(void)
{
	char line[LINE_MAX_BYTES], job[256], nodes[LINE_MAX_BYTES];
	int failed = 0;

	slurm_init(NULL); /* SLURM_CONF or the built-in slurm.conf path, as scontrol */
	while (fgets(line, sizeof(line), stdin)) {
		job_desc_msg_t desc;
		job_array_resp_msg_t *resp = NULL;
		uint32_t i;
		int bad = 0;

		if (line[0] == '\n')
			continue;
		if (sscanf(line, "%255s %8191s", job, nodes) != 2) {
			printf("error - unreadable line\n");
			failed = 1;
			continue;
		}
		slurm_init_job_desc_msg(&desc);
		desc.job_id_str = job;
		desc.req_nodes = nodes;
		if (slurm_update_job2(&desc, &resp) != SLURM_SUCCESS) {
			printf("error %s %s\n", job, slurm_strerror(slurm_get_errno()));
			failed = 1;
			continue;
		}
		for (i = 0; resp && i < resp->job_array_count; i++) {
			if (resp->error_code[i] != SLURM_SUCCESS) {
				printf("error %s %s\n", job, slurm_strerror(resp->error_code[i]));
				bad = 1;
			}
		}
		if (resp)
			slurm_free_job_array_resp(resp);
		if (bad)
			failed = 1;
		else
			printf("ok %s\n", job);
	}
	slurm_fini();
	return failed;
}
