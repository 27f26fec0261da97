/* smpi_nodes.c — MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) by simulated node (see smpi_nodes.h).
 *
 * The node of a rank is read from the name of its simulated host: the kit's platforms name
 * the host of core c on socket s of node n "<prefix><n>-s<s>-c<c>" (e.g. jupiter07-s0-c13,
 * mpilab.simulate.platform_xml.host_name), and MPI_Get_processor_name returns that name under SMPI.
 * Ranks are grouped by <prefix><n> with MPI_Comm_split, ordered by key as the standard says.
 * A host whose name does not follow that pattern (a user's platform file) is a node of its
 * own, which is exactly what SimGrid's own MPI_Comm_split_type does, so it is called then.
 * Other split types go to SimGrid's MPI_Comm_split_type unchanged.
 */
#include <mpi.h>
#include <ctype.h>
#include <string.h>

/* smpicc -include smpi_nodes.h reaches this file too: call SimGrid's own function below */
#undef MPI_Comm_split_type

/* Node number from "<prefix><digits>-s<digits>-c<digits>", or -1 if the name is not like that.
 * The prefix must not end in a digit; its characters are folded into the colour so that two
 * prefixes with the same node number stay apart. */
static int node_colour(const char *name)
{
    const char *c = strrchr(name, 'c');
    if (!c || c == name || c[-1] != '-' || !isdigit((unsigned char)c[1]))
        return -1;
    for (const char *q = c + 1; *q; q++)
        if (!isdigit((unsigned char)*q))
            return -1;
    const char *s = c - 2;                   /* the digits of the socket end at c - 2 */
    while (s > name && isdigit((unsigned char)*s))
        s--;
    if (s == name || *s != 's' || s[-1] != '-' || s == c - 2)
        return -1;
    const char *end = s - 1;                 /* the '-' before "s<digits>" */
    const char *d = end;
    while (d > name && isdigit((unsigned char)d[-1]))
        d--;
    if (d == end || d == name)
        return -1;
    unsigned node = 0, prefix = 5381;
    for (const char *q = d; q < end; q++)
        node = node * 10 + (unsigned)(*q - '0');
    for (const char *q = name; q < d; q++)
        prefix = prefix * 33 + (unsigned char)*q;
    return (int)((prefix % 1000u) * 100000u + node % 100000u);
}

int mpilab_comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
                           MPI_Comm *newcomm)
{
    char name[MPI_MAX_PROCESSOR_NAME];
    int len, colour, rc;
    if (split_type != MPI_COMM_TYPE_SHARED)
        return MPI_Comm_split_type(comm, split_type, key, info, newcomm);
    rc = MPI_Get_processor_name(name, &len);
    if (rc != MPI_SUCCESS)
        return rc;
    colour = node_colour(name);
    /* every rank must take the same path: use the SimGrid call only if no rank has a node */
    int any_node, mine = colour >= 0;
    rc = MPI_Allreduce(&mine, &any_node, 1, MPI_INT, MPI_MAX, comm);
    if (rc != MPI_SUCCESS)
        return rc;
    if (!any_node)
        return MPI_Comm_split_type(comm, split_type, key, info, newcomm);
    if (colour < 0) {
        /* a host outside the naming scheme next to hosts inside it: a node of its own */
        int rank;
        MPI_Comm_rank(comm, &rank);
        colour = 100000000 + rank;
    }
    return MPI_Comm_split(comm, colour, key, newcomm);
}
