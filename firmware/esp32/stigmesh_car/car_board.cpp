// car_board.cpp - the FNK0053's board inputs (see car_board.h): the robot id
// from car_config.h, the gyro of an MPU-6050 added on its I2C bus (the kit has
// none: imu_gyro.h), no extra telemetry members.
#include "car_board.h"

#include "car_config.h"
#include "car_link.h"
#include "imu_gyro.h"

static_assert(STIGMESH_ROBOT_ID >= 1 && STIGMESH_ROBOT_ID <= 255, "robot id is 1..255");

uint8_t car_robot_id()
{
    return (uint8_t)STIGMESH_ROBOT_ID;
}

bool car_gyro_z(float *rad_s)
{
    return imu_gyro_z(car_uptime_us(), rad_s);  // false without an MPU-6050
}

bool car_gyro_angle(uint64_t now_us, float *rad)
{
    return imu_gyro_angle(now_us, rad);
}

int car_telemetry_extra(char *, size_t)
{
    return 0;
}
