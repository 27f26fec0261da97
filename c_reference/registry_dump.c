/* registry_dump.c — print the registry as JSON without MPI (builds registry.json). */
#include "labcoll.h"

int main(void)
{
    lab_allgather_print_json(stdout);
    return 0;
}
